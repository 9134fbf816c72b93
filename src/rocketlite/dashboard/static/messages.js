/* Messages: find by topic + key, by id, or by store time (?topic=&key=, ?id=&topic=,
   ?topic=&begin=&end=); one result shows whole: its properties, the start of its body and whether
   each group consuming its queue has consumed it. */
"use strict";

function searchForm() {
  const field = (name, label) => Dash.el("label", {}, label + " ",
    Dash.el("input", {name, id: "q-" + name, value: Dash.param(name) || ""}));
  return Dash.el("form", {id: "search", method: "get", action: "/messages"},
    field("topic", "topic"), field("key", "key"), field("id", "or message id"),
    field("begin", "or stored from"), field("end", "to"),
    Dash.el("button", {type: "submit", id: "q-go"}, "Search"));
}

function detail(m) {
  const props = Object.entries(m.properties).sort().map(([k, v]) => ({k, v}));
  const facts = [
    ["topic", m.topic], ["msgId", m.msgId], ["offsetMsgId", m.offsetMsgId],
    ["queue", m.brokerName + " / " + m.queueId + " @ " + m.queueOffset],
    ["tags", m.tags || "-"], ["keys", m.keys.join(" ")],
    ["born", Dash.time(m.bornTimestamp) + " from " + m.bornHost],
    ["stored", Dash.time(m.storeTimestamp) + " at " + m.storeHost],
    ["reconsume times", m.reconsumeTimes], ["body size", m.bodySize + " B"],
  ].map(([k, v]) => ({k, v}));
  return Dash.el("section", {id: "detail"},
    Dash.el("h2", {}, "Message " + m.msgId),
    Dash.table("facts", [["field", r => r.k], ["value", r => String(r.v)]], facts),
    Dash.el("h3", {}, "Properties"),
    Dash.table("properties", [["key", r => r.k], ["value", r => r.v]], props),
    Dash.el("h3", {}, "Body"),
    Dash.el("pre", {id: "body"}, m.bodyText === null ? "(not UTF-8 text; base64) " + m.body
                                                     : m.bodyText));
}

async function consumedBy(m) {
  const q = new URLSearchParams({topic: m.topic, broker: m.brokerName, queue: m.queueId,
                                 offset: m.queueOffset});
  const groups = (await Dash.api("/api/messages/consumed?" + q)).groups;
  return Dash.el("section", {}, Dash.el("h3", {}, "Consumed by"),
    groups.length ? Dash.table("consumed", [
      ["group", g => g.group], ["online", g => g.online],
      ["group's offset", g => g.consumerOffset],
      ["state", g => g.consumed ? "consumed" : "not consumed yet"],
    ], groups.map(g => Object.assign({__key: g.group}, g)))
    : Dash.el("p", {id: "consumed"}, "no group has an offset on this queue"));
}

async function messagesPage() {
  const topic = Dash.param("topic"), key = Dash.param("key"), id = Dash.param("id");
  const nodes = [searchForm()];
  const begin = Dash.param("begin"), end = Dash.param("end");
  if (id || (topic && (key || begin))) {
    const q = new URLSearchParams();
    if (topic) q.set("topic", topic);
    if (id) q.set("id", id);
    else if (key) q.set("key", key);
    else { q.set("begin", begin); if (end) q.set("end", end); }
    const found = (await Dash.api("/api/messages?" + q)).messages;
    const view = m => "/messages?" + new URLSearchParams({topic: m.topic, id: m.offsetMsgId});
    nodes.push(Dash.el("p", {id: "found"}, found.length + " found"), Dash.table("results", [
      ["msgId", m => Dash.link(view(m), m.msgId)], ["keys", m => m.keys.join(" ")],
      ["tags", m => m.tags || "-"], ["stored", m => Dash.time(m.storeTimestamp)],
      ["queue", m => m.brokerName + "/" + m.queueId + " @ " + m.queueOffset],
      ["body", m => (m.bodyText || "").slice(0, 60)],
    ], found));
    if (found.length === 1) nodes.push(detail(found[0]), await consumedBy(found[0]));
  }
  Dash.show(nodes);
}

messagesPage().catch(e => { Dash.show(searchForm()); Dash.error(e); });
