// A queue's allocation over the last 7 days: allocated against deserved quota and fair share, drawn with
// the vendored plotly from the JSON the page embeds (json_script). The console's history page has one
// chart (#queue-history-chart, #queue-history-data); the tenant's workspace page has one per queue
// ([data-queue-history="<queue>"], all in #workspace-queue-history keyed by queue name).
// Series names come from the chart's data-*-text attributes (the reader's language), English when absent.
(function () {
  "use strict";
  if (!window.Plotly) return;
  const said = (el, key, english) => el.dataset[key] || english;

  function draw(el, h, height) {
    // few samples (a new queue, a sampler that was down): mark each, a lone sample between gaps has no line
    const mode = h.times.length < 300 ? "lines+markers" : "lines";
    const line = (y, name, color, dash) => ({
      x: h.times, y: y, name: name, type: "scatter", mode: mode, connectgaps: false,
      line: {shape: "hv", color: color, dash: dash || "solid", width: dash ? 1.5 : 2}, marker: {size: 4, color: color},
      hovertemplate: "%{y:.2f} GPUs<extra>" + name + "</extra>",
    });
    Plotly.newPlot(el, [
      line(h.allocated, said(el, "allocatedText", "allocated"), "#2d6a8f"),
      line(h.deserved, said(el, "deservedText", "deserved quota"), "#1f6f3a", "dash"),
      line(h.fair_share, said(el, "fairShareText", "fair share"), "#a36a1f", "dot"),
    ], {
      height: height, margin: {l: 50, r: 10, t: 10, b: 40}, legend: {orientation: "h"},
      xaxis: {range: [h.start, h.end], type: "date"}, yaxis: {title: "GPUs", rangemode: "tozero"},
    }, {displayModeBar: false, responsive: true});
    el.dataset.drawn = "1";
  }

  const one = document.getElementById("queue-history-chart");
  const oneData = document.getElementById("queue-history-data");
  if (one && oneData) draw(one, JSON.parse(oneData.textContent), 340);

  const manyData = document.getElementById("workspace-queue-history");
  if (manyData) {
    const charts = JSON.parse(manyData.textContent);
    document.querySelectorAll("[data-queue-history]").forEach(function (el) {
      const h = charts[el.dataset.queueHistory];
      if (h) draw(el, h, 260);
    });
  }
})();
