// The job page: per-replica GPU utilisation and memory charts (the vendored plotly, no CDN) from the
// JSON the page embeds; while the job runs, the charts' data and the cost part are read again every
// 30 s and whenever live.js says the job changed.
(function () {
  "use strict";
  const section = document.getElementById("job-usage");
  const costHolder = document.getElementById("job-cost-live");
  const embedded = document.getElementById("job-usage-data");
  if (!section || !embedded) return;
  const POLL_MS = 30000;
  let timer = null;
  let soon = null;
  // words from the page (the reader's language), English when absent; %(name)s parts filled in here
  const said = (key, english, figures) => Object.entries(figures || {}).reduce(
    (text, [name, value]) => text.replaceAll(`%(${name})s`, value), section.dataset[key] || english);

  function line(p, y, unit) {
    return {
      x: p.times, y: y, name: p.label, type: "scatter", mode: p.times.length < 60 ? "lines+markers" : "lines",
      connectgaps: false, marker: {size: 4},
      hovertemplate: `%{y:.1f} ${unit}<extra>${p.node ? said("onText", "%(replica)s on %(node)s", {replica: p.label, node: p.node})
        : p.label}</extra>`,
    };
  }

  // The replicas table follows the placements: rows for replicas placed since the page was drawn (the
  // "No replica placed yet" row goes), each one's mean utilisation as it changes.
  function showPlacements(placements) {
    const tbody = section.querySelector("#usage-table tbody");
    if (!tbody || !placements.length) return;
    const shown = [...tbody.querySelectorAll("tr[data-replica]")].map((tr) => tr.dataset.replica);
    if (shown.join("\n") !== placements.map((p) => p.label).join("\n")) {
      tbody.replaceChildren(...placements.map((p) => {
        const tr = document.createElement("tr");
        tr.dataset.replica = p.label;
        for (const [value, field] of [[p.label], [p.node || "–"], [p.slice || ""], ["", "mean-util"]]) {
          const td = document.createElement("td");
          td.textContent = value;
          if (field) td.dataset.field = field;
          tr.append(td);
        }
        return tr;
      }));
    }
    for (const p of placements) {
      const cell = tbody.querySelector(`tr[data-replica="${CSS.escape(p.label)}"] [data-field="mean-util"]`);
      if (cell) cell.textContent = p.mean_util === null ? "–" : `${p.mean_util} %`;
    }
  }

  function draw(data) {
    const charts = section.querySelector(".usage-charts");
    const none = document.getElementById("no-samples");
    if (charts) charts.hidden = !data.has_samples;
    if (none) none.hidden = data.has_samples;
    const bucket = document.getElementById("usage-bucket");
    if (bucket) bucket.textContent = data.bucket_s > 1 ? said("bucketText", "Each point averages %(seconds)s s.",
      {seconds: data.bucket_s}) : "";
    showPlacements(data.placements);
    if (!data.has_samples || !window.Plotly) return;
    const layout = (title, range) => ({
      height: 260, margin: {l: 55, r: 10, t: 10, b: 40}, legend: {orientation: "h"},
      xaxis: {type: "date"}, yaxis: {title: {text: title}, rangemode: "tozero", range: range},
    });
    const config = {displayModeBar: false, responsive: true};
    const util = document.getElementById("util-chart");
    const mem = document.getElementById("mem-chart");
    Plotly.react(util, data.placements.map((p) => line(p, p.util, "%")), layout("GPU utilisation %", [0, 100]), config);
    Plotly.react(mem, data.placements.map((p) => line(p, p.mem_mib, "MiB")), layout("GPU memory MiB"), config);
    util.dataset.drawn = mem.dataset.drawn = String(data.placements.length);
  }

  async function refresh() {
    soon = null;
    const [usage, cost] = await Promise.all([
      fetch(section.dataset.src, {credentials: "same-origin"}).then((r) => (r.ok ? r.json() : null)),
      costHolder ? fetch(costHolder.dataset.src, {credentials: "same-origin"}).then((r) => (r.ok ? r.text() : null))
        : null,
    ]);
    if (cost !== null && costHolder) costHolder.innerHTML = cost;
    if (usage !== null) {
      draw(usage);
      if (usage.final) { section.dataset.active = "0"; clearInterval(timer); }
    }
    document.body.dataset.costRefreshed = String(Date.now());
  }

  draw(JSON.parse(embedded.textContent));
  if (section.dataset.active === "1") timer = setInterval(refresh, POLL_MS);
  document.addEventListener("job:changed", () => { if (!soon) soon = setTimeout(refresh, 300); });
})();
