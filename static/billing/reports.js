// Reports page: draws the charts with the vendored plotly.js and follows Excel exports. Words come from
// the page's data-*-text attributes (the reader's language), English when absent.
(function () {
  "use strict";
  const words = document.getElementById("report-charts");
  const said = (el, key, english) => (el && el.dataset[key]) || english;
  const title = (id, english) => said(document.getElementById(id), "title", english);
  const dataNode = document.getElementById("chart-data");
  if (dataNode && window.Plotly) {
    const d = JSON.parse(dataNode.textContent);
    const cfg = { displaylogo: false, responsive: true };
    // one cost series per currency: amounts of two currencies are never added
    const costs = d.costs.map((c) => ({ x: d.days, y: c.cost, type: "bar", name: said(words, "costText", "cost") + " " + c.currency }));
    Plotly.newPlot("chart-time", [
      ...costs,
      { x: d.days, y: d.allocated, type: "scatter", mode: "lines+markers", name: said(words, "allocatedText", "GPU-hours allocated"), yaxis: "y2" },
      { x: d.days, y: d.used, type: "scatter", mode: "lines+markers", name: said(words, "usedText", "GPU-hours used"), yaxis: "y2" },
    ], { title: { text: title("chart-time", "Cost and GPU-hours per day") }, margin: { t: 40, r: 50 },
         xaxis: { type: "date", tickformat: "%b %d", dtick: d.days.length > 31 ? undefined : 86400000 },
         yaxis: { title: { text: said(words, "costText", "cost") }, rangemode: "tozero" },
         yaxis2: { title: { text: said(words, "hoursText", "GPU-hours") }, overlaying: "y", side: "right", rangemode: "tozero" },
         legend: { orientation: "h" } }, cfg);
    const modelCosts = d.costs.map((c, i) => ({ x: d.models, y: c.model_cost, type: "bar",
      name: said(words, "costText", "cost") + " " + c.currency, offsetgroup: i + 1 }));
    Plotly.newPlot("chart-models", [
      ...modelCosts,
      { x: d.models, y: d.model_hours, type: "bar", name: said(words, "allocatedText", "GPU-hours allocated"), yaxis: "y2",
        offsetgroup: d.costs.length + 1 },
    ], { title: { text: title("chart-models", "By GPU model") }, barmode: "group", margin: { t: 40, r: 50 },
         yaxis: { title: { text: said(words, "costText", "cost") }, rangemode: "tozero" },
         yaxis2: { title: { text: said(words, "hoursText", "GPU-hours") }, overlaying: "y", side: "right", rangemode: "tozero" },
         legend: { orientation: "h" } }, cfg);
  }

  const form = document.getElementById("export-excel-form");
  const progress = document.getElementById("export-progress");
  const link = document.getElementById("export-download");
  function follow(statusUrl) {
    progress.hidden = false;
    const bar = progress.querySelector("progress"), pct = progress.querySelector(".pct");
    const tick = async () => {
      const r = await fetch(statusUrl, { headers: { Accept: "application/json" } });
      const s = await r.json();
      bar.value = s.percent; pct.textContent = s.percent + " % (" + s.rows_done + " / " + s.rows_total + " " + said(words, "rowsText", "rows") + ")";
      if (s.state === "done") { link.href = s.download_url; link.hidden = false; return; }
      if (s.state === "failed") { pct.textContent = said(words, "failedText", "failed") + ": " + s.error; return; }
      setTimeout(tick, 1000);
    };
    tick();
  }
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      link.hidden = true;
      const r = await fetch(form.action, { method: "POST", body: new FormData(form),
                                           headers: { Accept: "application/json" } });
      if (!r.ok) { alert(await r.text()); return; }
      follow((await r.json()).status_url);
    });
  }
})();
