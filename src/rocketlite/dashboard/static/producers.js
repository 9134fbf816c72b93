/* Producers: the connections of a producer group to a topic's brokers (?group=&topic=). */
"use strict";

function producerForm() {
  const field = (name, label) => Dash.el("label", {}, label + " ",
    Dash.el("input", {name, id: "p-" + name, value: Dash.param(name) || ""}));
  return Dash.el("form", {id: "producer-search", method: "get", action: "/producers"},
    field("group", "producer group"), field("topic", "topic"),
    Dash.el("button", {type: "submit", id: "p-go"}, "Show"));
}

async function producersPage() {
  const group = Dash.param("group"), topic = Dash.param("topic");
  const nodes = [producerForm()];
  if (group && topic) {
    const found = (await Dash.api("/api/producers?" + new URLSearchParams({group, topic}))).connections;
    nodes.push(Dash.el("h2", {}, "Connections of " + group + " to " + topic),
      Dash.table("producers", [
        ["client id", c => c.clientId], ["address", c => c.clientAddr],
        ["language", c => c.language], ["version", c => c.versionDesc],
      ], found.map(c => Object.assign({__key: c.clientId}, c))));
  }
  Dash.show(nodes);
}

producersPage().catch(e => { Dash.show(producerForm()); Dash.error(e); });
