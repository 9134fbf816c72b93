/* DLQ: the dead-letter topics; ?group=G lists G's dead letters and re-sends the next one or all
   (a write: asks for the dashboard's login, kept for this tab only). */
"use strict";

function resend(group, max) {
  return Dash.write("/api/dlq/" + encodeURIComponent(group) + "/resend", {max},
    document.getElementById("resend-result"),
    c => "re-sent " + c.resent + " of " + c.read + " read" + (c.stopped ? "; stopped: " + c.stopped : ""));
}

async function dlqPage() {
  const nodes = [];
  const group = Dash.param("group");
  if (group) {
    const found = (await Dash.api("/api/dlq/" + encodeURIComponent(group))).messages;
    nodes.push(Dash.el("h2", {}, "Dead letters of " + group), Dash.loginForm(),
      Dash.el("p", {},
        Dash.el("button", {id: "resend-one", onclick: () => resend(group, 1)}, "Resend next"), " ",
        Dash.el("button", {id: "resend-all", onclick: () => resend(group, null)}, "Resend all")),
      Dash.el("p", {id: "resend-result"}),
      Dash.table("dead-letters", [
        ["msgId", m => m.msgId], ["original topic", m => m.properties.RETRY_TOPIC || "-"],
        ["keys", m => m.keys.join(" ")], ["reconsume times", m => m.reconsumeTimes],
        ["stored", m => Dash.time(m.storeTimestamp)],
        ["body", m => (m.bodyText || "").slice(0, 80)],
      ], found));
  }
  const data = await Dash.api("/api/dlq");
  nodes.push(Dash.el("h2", {}, "DLQ topics"), Dash.table("dlq", [
    ["group", d => Dash.link("/dlq?group=" + encodeURIComponent(d.group), d.group)],
    ["topic", d => d.topic], ["queues", d => d.queues], ["messages", d => Dash.num(d.messages)],
  ], data.dlq.map(d => Object.assign({__key: d.group}, d))));
  Dash.show(nodes);
}

dlqPage().catch(e => { Dash.show([]); Dash.error(e); });
