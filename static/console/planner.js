// The capacity planner's run page: follows a queued or running replay (its progress bar, from
// ?partial=status) until it is done, then reloads; on a finished replay draws the wait distribution
// per queue and the GPUs allocated over time, actual against edited, with the vendored plotly. Words
// come from the page's data-*-text attributes (the reader's language), English when absent.
(function () {
  "use strict";
  const said = (el, key, english) => (el && el.dataset[key]) || english;

  const status = document.getElementById("planner-status");
  if (status && (status.dataset.state === "queued" || status.dataset.state === "running")) {
    const bar = document.getElementById("planner-progress");
    const pct = document.getElementById("planner-pct");
    const state = document.getElementById("planner-state");
    const poll = function () {
      fetch(status.dataset.statusSrc, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          if (!s) { window.setTimeout(poll, 3000); return; }
          const p = Math.round(100 * s.progress);
          bar.value = p;
          pct.textContent = p + " %";
          state.textContent = s.state === "running" ? said(state, "runningText", "Running") : said(state, "queuedText", "Queued");
          if (s.state === "done" || s.state === "failed" || s.state === "cancelled") { window.location.reload(); return; }
          window.setTimeout(poll, 1000);
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    };
    window.setTimeout(poll, 500);
  }

  const dataEl = document.getElementById("planner-chart-data");
  if (!dataEl || !window.Plotly) return;
  const data = JSON.parse(dataEl.textContent);
  const colors = {actual: "#7a8a99", edited: "#2d6a8f"};
  const charts = document.getElementById("planner-charts");
  const names = {actual: said(charts, "actualText", "actual cluster"), edited: said(charts, "editedText", "edited cluster")};
  const config = {displayModeBar: false, responsive: true};

  const waits = [];
  ["actual", "edited"].forEach(function (side) {
    const byQueue = (data.waits || {})[side] || {};
    const x = [], y = [];
    Object.keys(byQueue).sort().forEach(function (q) {
      byQueue[q].forEach(function (w) { x.push(q); y.push(w); });
    });
    waits.push({type: "box", name: names[side], x: x, y: y, marker: {color: colors[side]}, boxpoints: false});
  });
  const waitsEl = document.getElementById("chart-waits");
  Plotly.newPlot(waitsEl, waits, {
    boxmode: "group", height: 340, margin: {l: 55, r: 10, t: 10, b: 60}, legend: {orientation: "h"},
    yaxis: {title: said(charts, "waitText", "wait (minutes)"), rangemode: "tozero"},
  }, config);
  waitsEl.dataset.drawn = "1";

  const lines = [];
  ["actual", "edited"].forEach(function (side) {
    const a = (data.allocation || {})[side];
    if (!a) return;
    lines.push({type: "scatter", mode: "lines", name: names[side] + ": " + said(charts, "allocatedText", "allocated"), x: a.times, y: a.gpus,
                line: {color: colors[side], shape: "hv", width: 2}});
    lines.push({type: "scatter", mode: "lines", name: names[side] + ": " + said(charts, "capacityText", "capacity"), x: [a.times[0], a.times[a.times.length - 1]],
                y: [a.capacity, a.capacity], line: {color: colors[side], dash: "dot", width: 1.5}});
  });
  const allocEl = document.getElementById("chart-allocation");
  Plotly.newPlot(allocEl, lines, {
    height: 340, margin: {l: 55, r: 10, t: 10, b: 40}, legend: {orientation: "h"},
    xaxis: {type: "date"}, yaxis: {title: "GPUs", rangemode: "tozero"},
  }, config);
  allocEl.dataset.drawn = "1";
})();
