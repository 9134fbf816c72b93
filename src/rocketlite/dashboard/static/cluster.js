/* Cluster: every broker the NameServer knows, its role, version, tps and disk use. */
"use strict";

Dash.every(5000, async () => {
  const data = await Dash.api("/api/cluster");
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
