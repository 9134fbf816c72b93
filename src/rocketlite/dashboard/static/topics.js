/* Topics: every user topic with its messages and groups, and the messages put per second into
   each (from the growth of its max offsets between two polls) charted over the time the page is
   open; ?topic=T adds the queues of T. */
"use strict";

const rateChart = new TimeChart("rate-chart", "messages stored per second (each topic)", "msg/s");
let lastTotals = null;

function recordRates(topics) {
  const now = Date.now() / 1000, totals = Object.fromEntries(topics.map(t => [t.topic, t.putTotal]));
  if (lastTotals !== null) {
    const dt = now - lastTotals.at, rates = {};
    for (const [name, total] of Object.entries(totals)) {
      if (name in lastTotals.totals) rates[name] = Math.max(0, total - lastTotals.totals[name]) / dt;
    }
    rateChart.record(rates);
    rateChart.draw(document.getElementById("content"));
  }
  lastTotals = {at: now, totals};
}

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
    const configs = t.configs.map(c => Object.assign({__key: c.address}, c.config, {address: c.address}));
    nodes.push(Dash.el("h2", {}, "Config of " + chosen), Dash.table("configs", [
      ["broker", c => c.address],
      ["read queues", c => c.readQueueNums],
      ["write queues", c => c.writeQueueNums],
      ["perm", c => c.perm],
      ["order", c => String(c.order)],
      ["filter", c => c.topicFilterType],
    ], configs));
  }
  const data = await Dash.api("/api/topics");
  recordRates(data.topics);
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

Dash.every(3000, topicsPage);
