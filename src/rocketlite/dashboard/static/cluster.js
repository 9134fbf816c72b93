/* Cluster: every broker the NameServer knows, its role, version, tps and disk use; its put tps
   (the broker's own figure) charted over the time the page is open. */
"use strict";

const tpsChart = new TimeChart("tps-chart", "messages put per second (each broker)", "msg/s");

Dash.every(3000, async () => {
  const data = await Dash.api("/api/cluster");
  tpsChart.record(Object.fromEntries(data.brokers.filter(b => !b.error).map(
    b => [b.brokerName + "/" + b.brokerId + " " + b.address, b.putTps])));
  tpsChart.draw(document.getElementById("content"));
  const rows = data.brokers.map(b => Object.assign({__key: b.address}, b));
  Dash.show(Dash.table("brokers", [
    ["cluster", b => b.cluster],
    ["broker", b => b.brokerName],
    ["id", b => b.brokerId],
    ["address", b => b.address],
    ["role", b => b.role],
    ["version", b => b.version],
    ["put tps", b => b.putTps.toFixed(2)],
    ["get tps", b => b.getTps.toFixed(2)],
    ["put today", b => Dash.num(b.msgPutToday)],
    ["get today", b => Dash.num(b.msgGetToday)],
    ["CommitLog max offset", b => Dash.num(b.commitLogMaxOffset)],
    ["disk use", b => b.diskRatio === null ? "-" : (b.diskRatio * 100).toFixed(1) + " %"],
    ["up", b => b.runtime],
    ["error", b => b.error || ""],
  ], rows));
});
