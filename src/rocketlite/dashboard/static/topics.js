/* Topics: every user topic with its messages and groups; ?topic=T adds the queues of T. */
"use strict";

async function topicsPage() {
  const chosen = Dash.param("topic");
  const nodes = [];
  if (chosen) {
    const t = await Dash.api("/api/topics/" + encodeURIComponent(chosen));
    const rows = t.queues.map(q => Object.assign({__key: q.brokerName + "/" + q.queueId}, q));
    nodes.push(Dash.el("h2", {}, "Queues of " + chosen), Dash.table("queues", [
      ["broker", q => q.brokerName],
      ["queue", q => q.queueId],
      ["min offset", q => q.minOffset],
      ["max offset", q => q.maxOffset],
      ["last update", q => Dash.time(q.lastUpdateTimestamp)],
    ], rows));
  }
  const data = await Dash.api("/api/topics");
  const rows = data.topics.map(t => Object.assign({__key: t.topic}, t));
  nodes.push(Dash.el("h2", {}, "All topics"), Dash.table("topics", [
    ["topic", t => Dash.link("/topics?topic=" + encodeURIComponent(t.topic), t.topic)],
    ["queues", t => t.queues],
    ["messages held", t => Dash.num(t.messages)],
    ["max offset (sum of queues)", t => t.putTotal],
    ["last message", t => Dash.time(t.lastUpdateTimestamp)],
    ["put tps", t => t.putTps.toFixed(2)],
    ["groups (lag)", t => t.groups.map(g => g.group + " (" + g.accumulation + ")").join(", ")],
  ], rows));
  Dash.show(nodes);
}

Dash.every(5000, topicsPage);
