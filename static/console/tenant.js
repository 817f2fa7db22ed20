// Tenant dashboard: GPU-hours allocated and used per day this month (plotly from static/vendor).
(function () {
  "use strict";
  const el = document.getElementById("chart-days");
  const data = document.getElementById("days-data");
  if (!el || !data || !window.Plotly) return;
  const d = JSON.parse(data.textContent);
  Plotly.newPlot(el, [
    {x: d.days, y: d.allocated, name: el.dataset.allocatedText || "allocated", type: "bar"},
    {x: d.days, y: d.used, name: el.dataset.usedText || "used", type: "bar"},
  ], {barmode: "group", height: 260, margin: {l: 50, r: 10, t: 10, b: 40}, yaxis: {title: el.dataset.hoursText || "GPU-hours"},
      legend: {orientation: "h"}}, {displayModeBar: false, responsive: true});
})();
