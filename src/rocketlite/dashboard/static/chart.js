/* A line chart of named figures over the time a page has been open (uPlot), fed one sample per
   poll: new names join with gaps before them, names gone get gaps. */
"use strict";

const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#7f7f7f"];

class TimeChart {
  constructor(id, title, unit, keep) {
    this.id = id; this.title = title; this.unit = unit; this.keep = keep || 300;
    this.times = []; this.values = {}; this.plot = null; this.names = "";
  }

  /* One sample: {name: value} now. */
  record(sample) {
    this.times.push(Date.now() / 1000);
    const n = this.times.length;
    for (const name of Object.keys(sample)) {
      if (!(name in this.values)) this.values[name] = new Array(n - 1).fill(null);
    }
    for (const [name, series] of Object.entries(this.values)) {
      series.push(name in sample ? sample[name] : null);
    }
    if (n > this.keep) {
      this.times.shift();
      for (const series of Object.values(this.values)) series.shift();
    }
  }

  /* The series of name (for tests and tooltips). */
  series(name) { return this.values[name] || []; }

  /* Draw into the element #id, created before the element before (once). */
  draw(before) {
    let box = document.getElementById(this.id);
    if (box === null) {
      box = Dash.el("div", {id: this.id, class: "chart"});
      before.parentNode.insertBefore(box, before);
    }
    const names = Object.keys(this.values).sort();
    const data = [this.times, ...names.map(n => this.values[n])];
    if (this.plot === null || this.names !== names.join("\n")) {
      if (this.plot !== null) this.plot.destroy();
      this.names = names.join("\n");
      const width = Math.min(1000, Math.max(400, document.getElementById("page").clientWidth - 40));
      this.plot = new uPlot({
        title: this.title, width, height: 240,
        series: [{}, ...names.map((n, i) => ({label: n, stroke: COLOURS[i % COLOURS.length],
                                               width: 2}))],
        axes: [{}, {label: this.unit}],
        // one sample: a minute around it, not uPlot's years
        scales: {x: {time: true, range: (u, lo, hi) => lo === hi ? [lo - 30, hi + 30] : [lo, hi]}},
      }, data, box);
    } else {
      this.plot.setData(data);
    }
  }
}
