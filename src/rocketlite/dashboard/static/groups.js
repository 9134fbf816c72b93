/* Consumer groups: each group's lag (total and per queue) polled every 2 s and charted over the
   time this page has been open; ?group=G adds G's online members and moves its offsets. */
"use strict";

const lagChart = new TimeChart("lag-chart", "lag (messages) over time", "messages");

/* The chosen group's offset controls, built once (outside the redrawn content, so a login being
   typed survives the polls): per topic, back to the start or skip to the end. */
function resetControls(group, topics) {
  const out = Dash.el("p", {id: "reset-result"});
  const reset = (topic, timestamp) => Dash.write(
    "/api/groups/" + encodeURIComponent(group) + "/reset", {topic, timestamp}, out,
    r => "reset " + topic + ": " + r.queues.map(q => q.queueId + "→" + q.offset).join(", "));
  const rows = topics.map(t => Dash.el("p", {"data-topic": t}, t + ": ",
    Dash.el("button", {id: "reset-start-" + t, onclick: () => reset(t, 0)}, "Reset to start"), " ",
    Dash.el("button", {id: "reset-end-" + t, onclick: () => reset(t, "end")}, "Skip to end")));
  return Dash.el("section", {id: "reset"}, Dash.el("h2", {}, "Move the offsets of " + group),
    Dash.loginForm(), rows, out);
}

async function groupsPage() {
  const data = await Dash.api("/api/groups");
  lagChart.record(Object.fromEntries(data.groups.map(g => [g.group, g.diffTotal])));
  lagChart.draw(document.getElementById("content"));
  const nodes = [Dash.el("p", {id: "polls"}, "polls: " + lagChart.times.length)];
  const rows = data.groups.map(g => Object.assign({__key: g.group}, g));
  nodes.push(Dash.table("groups", [
    ["group", g => Dash.link("/groups?group=" + encodeURIComponent(g.group), g.group)],
    ["online", g => g.online],
    ["type", g => g.consumeType || "-"],
    ["model", g => g.messageModel || "-"],
    ["lag", g => Dash.num(g.diffTotal)],
    ["consume tps", g => g.consumeTps.toFixed(2)],
  ], rows));
  const chosen = Dash.param("group");
  const mine = data.groups.find(g => g.group === chosen);
  if (mine && document.getElementById("reset") === null) {
    const topics = [...new Set(mine.queues.map(q => q.topic))].filter(t => !t.startsWith("%")).sort();
    const box = document.getElementById("lag-chart");
    box.parentNode.insertBefore(resetControls(chosen, topics), box);
  }
  for (const g of data.groups.filter(g => !chosen || g.group === chosen)) {
    nodes.push(Dash.el("h2", {}, "Queues of " + g.group), Dash.table("queues-" + g.group, [
      ["topic", q => q.topic], ["broker", q => q.brokerName], ["queue", q => q.queueId],
      ["broker offset", q => q.brokerOffset], ["consumer offset", q => q.consumerOffset],
      ["lag", q => q.diff], ["last consumed", q => Dash.time(q.lastTimestamp)],
    ], g.queues));
  }
  if (chosen) {
    const one = await Dash.api("/api/groups/" + encodeURIComponent(chosen));
    const conns = one.connection ? one.connection.connectionSet : [];
    nodes.push(Dash.el("h2", {}, "Connections of " + chosen));
    if (!conns.length) nodes.push(Dash.el("p", {id: "offline"}, "offline: no member connected"));
    else nodes.push(Dash.table("connections", [
      ["client id", c => c.clientId], ["address", c => c.clientAddr],
      ["language", c => c.language], ["version", c => c.versionDesc],
    ], conns));
  }
  Dash.show(nodes);
}

Dash.every(2000, groupsPage);
