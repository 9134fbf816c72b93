/* rocketlite dashboard: what every page shares. The pages build their DOM with textContent only
   (never innerHTML from data), so a topic, key or body cannot inject markup. */
"use strict";

const Dash = {
  /* GET or POST a JSON API path; the parsed answer, or throws Error(reason). */
  async api(path, options) {
    const headers = {"Accept": "application/json"};
    const login = sessionStorage.getItem("rocketlite-login");
    if (login) headers["Authorization"] = "Basic " + login;
    const init = Object.assign({headers}, options || {});
    if (init.body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(path, init);
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) throw new Error((data && data.error) || (r.status + " " + r.statusText));
    return data;
  },
  el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  },
  /* A table: columns [[title, row => cell]], rows; a cell is text or a Node. */
  table(id, columns, rows) {
    const head = Dash.el("tr", {}, columns.map(([title]) => Dash.el("th", {}, title)));
    const body = rows.map(row => Dash.el("tr", {"data-key": row.__key || null},
      columns.map(([, cell]) => Dash.el("td", {}, cell(row)))));
    return Dash.el("table", {id}, Dash.el("thead", {}, head), Dash.el("tbody", {}, body));
  },
  time(ms) {
    return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "-";
  },
  num(n) { return (n === null || n === undefined) ? "-" : Number(n).toLocaleString("en"); },
  param(name) { return new URLSearchParams(location.search).get(name); },
  link(href, text) { return Dash.el("a", {href}, text); },
  error(e) {
    const p = document.getElementById("error");
    if (e) { p.textContent = String(e.message || e); p.hidden = false; } else { p.hidden = true; }
  },
  /* Replace the page's content with nodes. */
  show(...nodes) { document.getElementById("content").replaceChildren(...nodes.flat()); },
  /* The login writes need (the dashboard's --username/--password), kept for this tab only. */
  loginForm() {
    const user = Dash.el("input", {id: "login-user", placeholder: "username"});
    const pass = Dash.el("input", {id: "login-password", type: "password", placeholder: "password"});
    const save = () => sessionStorage.setItem("rocketlite-login", btoa(user.value + ":" + pass.value));
    return Dash.el("p", {id: "login"}, "Login for writes: ", user, pass,
      Dash.el("button", {id: "login-save", type: "button", onclick: save}, "Use"));
  },
  /* POST payload to path; what(answer) or the refusal goes into the element out. */
  async write(path, payload, out, what) {
    out.textContent = "working…";
    try {
      out.textContent = what(await Dash.api(path, {method: "POST", body: JSON.stringify(payload)}));
    } catch (e) {
      out.textContent = "refused: " + e.message;
    }
  },
  /* Run refresh now and every ms milliseconds; a failure shows its reason and retries. */
  every(ms, refresh) {
    const run = async () => {
      try { await refresh(); Dash.error(null); } catch (e) { Dash.error(e); }
      setTimeout(run, ms);
    };
    run();
  },
};
