// A service's charts (replicas, request rate, latency, cost so far), drawn with the vendored plotly from
// the JSON the page embeds, then polled from its series URL every few seconds so they move live.
(function () {
  "use strict";
  const data = document.getElementById("service-series-data");
  const summary = document.getElementById("service-summary");
  if (!data || !summary || !window.Plotly) return;
  const layout = (title, unit) => ({
    title: {text: title, font: {size: 13}}, height: 240, margin: {l: 50, r: 10, t: 30, b: 30},
    legend: {orientation: "h"}, xaxis: {type: "date"}, yaxis: {title: unit, rangemode: "tozero"},
  });
  const line = (x, y, name, color, shape) => ({
    x: x, y: y, name: name, type: "scatter", mode: x.length < 200 ? "lines+markers" : "lines",
    line: {shape: shape || "linear", color: color, width: 2}, marker: {size: 3}, connectgaps: false,
  });
  const config = {displayModeBar: false, responsive: true};
  // chart words from the page (the reader's language), English when absent
  const words = document.getElementById("service-charts").dataset;
  const said = (key, english) => words[key] || english;
  function draw(s) {
    Plotly.react("chart-replicas", [line(s.times, s.replicas, said("runningText", "running"), "#2d6a8f", "hv"),
      line(s.times, s.desired, said("wantedText", "wanted"), "#a36a1f", "hv")],
    layout(said("replicasText", "Replicas"), said("replicasText", "replicas")), config);
    Plotly.react("chart-rps", [line(s.times, s.rps, said("requestsText", "requests/s"), "#1f6f3a")],
      layout(said("rpsText", "Request rate"), "req/s"), config);
    Plotly.react("chart-latency", [line(s.times, s.p50_ms, "p50", "#2d6a8f"), line(s.times, s.p95_ms, "p95", "#b03a2e")],
      layout(said("latencyText", "Latency"), "ms"), config);
    Plotly.react("chart-cost", [line(s.cost_times, s.cost, said("costText", "cost"), "#6b4c9a", "hv")],
      layout(said("costSoFarText", "Cost so far"), s.currency || ""), config);
    document.getElementById("service-charts").dataset.points = String(s.times.length);
  }
  function text(id, value) {
    const el = document.getElementById(id);
    if (el && value !== undefined && value !== null) el.textContent = value;
  }
  draw(JSON.parse(data.textContent));
  const url = summary.dataset.series;
  async function poll() {
    try {
      const response = await fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
      if (response.ok) {
        const s = await response.json();
        draw(s);
        text("service-state", s.state);
        text("stat-replicas", s.running + " / " + s.desired);
        text("stat-requests", String(s.requests));
        if (s.cost_per_1000 !== null) text("stat-cost-per-1000", window.portalFormats.rate(s.cost_per_1000, s.currency));
        if (s.gpu_seconds_per_request !== null) text("stat-gpu-s", s.gpu_seconds_per_request.toFixed(3));
      }
    } catch (error) { /* offline for a moment: the next poll tries again */ }
  }
  setInterval(poll, 3000);
}());
