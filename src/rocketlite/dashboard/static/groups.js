/* Consumer groups: each group's lag (total and per queue) polled every 2 s and charted over the
   time this page has been open (uPlot); ?group=G adds G's online members. */
"use strict";

const HISTORY = 300;  // points kept per group: 10 minutes at one poll every 2 s
const lagHistory = {times: [], lags: {}};
let chart = null, chartGroups = "";

function record(groups) {
  lagHistory.times.push(Date.now() / 1000);
  const names = groups.map(g => g.group);
  for (const n of names) {
    if (!(n in lagHistory.lags)) lagHistory.lags[n] = lagHistory.times.slice(1).map(() => null);
    lagHistory.lags[n].push(null);
  }
  for (const g of groups) lagHistory.lags[g.group][lagHistory.lags[g.group].length - 1] = g.diffTotal;
  for (const n of Object.keys(lagHistory.lags)) {
    if (lagHistory.lags[n].length < lagHistory.times.length) lagHistory.lags[n].push(null);
  }
  if (lagHistory.times.length > HISTORY) {
    lagHistory.times.shift();
    for (const n of Object.keys(lagHistory.lags)) lagHistory.lags[n].shift();
  }
}

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"];

function drawChart(box) {
  const names = Object.keys(lagHistory.lags).sort();
  const data = [lagHistory.times, ...names.map(n => lagHistory.lags[n])];
  if (chart === null || chartGroups !== names.join("\n")) {
    if (chart !== null) chart.destroy();
    chartGroups = names.join("\n");
    chart = new uPlot({
      title: "lag (messages) over time", height: 260,
      width: Math.min(1000, Math.max(400, document.getElementById("page").clientWidth - 40)),
      series: [{}, ...names.map((n, i) => ({label: n, stroke: COLOURS[i % COLOURS.length],
                                             width: 2, spanGaps: false}))],
      axes: [{}, {label: "messages"}],
    }, data, box);
  } else {
    chart.setData(data);
  }
}

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
  record(data.groups);
  let box = document.getElementById("lag-chart");
  if (box === null) {
    box = Dash.el("div", {id: "lag-chart"});
    document.getElementById("page").insertBefore(box, document.getElementById("content"));
  }
  drawChart(box);
  const nodes = [Dash.el("p", {id: "polls"}, "polls: " + lagHistory.times.length)];
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
    document.getElementById("page").insertBefore(resetControls(chosen, topics), box);
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
      ["language", c => c.language], ["version", c => c.version],
    ], conns));
  }
  Dash.show(nodes);
}

Dash.every(2000, groupsPage);
