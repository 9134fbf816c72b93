/* DLQ: the dead-letter topics; ?group=G lists G's dead letters and re-sends the next one or all
   (a write: asks for the dashboard's login, kept for this tab only). */
"use strict";

function loginForm() {
  const user = Dash.el("input", {id: "login-user", placeholder: "username"});
  const pass = Dash.el("input", {id: "login-password", type: "password", placeholder: "password"});
  const save = () => sessionStorage.setItem("rocketlite-login", btoa(user.value + ":" + pass.value));
  return Dash.el("p", {id: "login"}, "Login for writes: ", user, pass,
    Dash.el("button", {id: "login-save", type: "button", onclick: save}, "Use"));
}

async function resend(group, max) {
  const out = document.getElementById("resend-result");
  out.textContent = "re-sending…";
  try {
    const c = await Dash.api("/api/dlq/" + encodeURIComponent(group) + "/resend",
                             {method: "POST", body: JSON.stringify({max})});
    out.textContent = "re-sent " + c.resent + " of " + c.read + " read" +
      (c.stopped ? "; stopped: " + c.stopped : "");
  } catch (e) {
    out.textContent = "refused: " + e.message;
  }
}

async function dlqPage() {
  const nodes = [];
  const group = Dash.param("group");
  if (group) {
    const found = (await Dash.api("/api/dlq/" + encodeURIComponent(group))).messages;
    nodes.push(Dash.el("h2", {}, "Dead letters of " + group), loginForm(),
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
