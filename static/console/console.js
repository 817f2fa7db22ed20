// Operator console: live sections and plotly charts (plotly served from static/vendor, no CDN).
// Every element with data-live-src is re-fetched (server-rendered HTML) when a job event arrives
// on the operators' websocket; charts are drawn from JSON embedded in the page. Words come from the
// page's data-*-text / data-*-label attributes (in the reader's language), English when absent.
(function () {
  "use strict";
  const status = document.getElementById("live-status");
  const said = (el, key, english) => (el && el.dataset[key]) || english;
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  let timer = null;
  let retry = 500;

  function drawHeatmap() {
    const el = document.getElementById("cluster-heatmap");
    const data = document.getElementById("heatmap-data");
    if (!el || !data || !window.Plotly) return;
    const h = JSON.parse(data.textContent);
    Plotly.react(el, [{
      type: "heatmap", z: h.z, x: h.x, y: h.y, text: h.text, zmin: 0, zmax: 1,
      colorscale: [[0, "#f4f8fb"], [0.5, "#7fb8dd"], [1, "#14507a"]],
      hovertemplate: `%{y} %{x}<br>${said(el, "allocatedLabel", "allocated")} %{z:.0%}<br>%{text}<extra></extra>`,
      colorbar: {title: said(el, "allocatedLabel", "allocated"), tickformat: ".0%"}, xgap: 2, ygap: 2,
    }], {margin: {l: 190, r: 20, t: 10, b: 30}, height: Math.max(220, 22 * h.y.length + 60),
         yaxis: {autorange: "reversed"}}, {displayModeBar: false, responsive: true});
  }

  function drawUsage() {
    const holder = document.getElementById("usage-charts");
    const data = document.getElementById("usage-data");
    if (!holder || !data || !window.Plotly) return;
    JSON.parse(data.textContent).forEach((u) => {
      const div = document.createElement("div");
      div.className = "chart";
      div.dataset.pool = u.pool;
      holder.appendChild(div);
      Plotly.newPlot(div, [
        {x: u.hours, y: u.used, name: said(holder, "usedLabel", "used"), type: "scatter", mode: "lines", line: {shape: "hv", color: "#1f6f3a"},
         fill: "tozeroy", fillcolor: "rgba(31,111,58,0.25)"},
        {x: u.hours, y: u.allocated, name: said(holder, "allocatedLabel", "allocated (shaded gap: waste)"), type: "scatter", mode: "lines",
         line: {shape: "hv", color: "#2d6a8f"}, fill: "tonexty", fillcolor: "rgba(163,35,31,0.22)"},
      ], {title: {text: u.pool, font: {size: 14}}, height: 230, margin: {l: 50, r: 10, t: 30, b: 40},
          yaxis: {title: said(holder, "axisLabel", "GPU-hours / hour")}, legend: {orientation: "h"}}, {displayModeBar: false, responsive: true});
    });
  }

  function refresh() {
    timer = null;
    document.querySelectorAll("[data-live-src]").forEach((el) => {
      fetch(el.dataset.liveSrc, {credentials: "same-origin"})
        .then((r) => (r.ok ? r.text() : null))
        .then((html) => {
          if (html === null) return;
          el.innerHTML = html;
          drawHeatmap();
          document.body.dataset.refreshed = String(Date.now());
        });
    });
  }

  function connect() {
    if (!document.querySelector("[data-live-src]")) return;
    const socket = new WebSocket(`${scheme}://${window.location.host}/ws/cluster/`);
    socket.onopen = () => { document.body.dataset.live = "open"; if (status) status.textContent = said(status, "liveText", "live"); };
    socket.onmessage = (message) => {
      const type = JSON.parse(message.data).type;
      // Joined (see live.js): re-read the sections, events sent while the socket was down are not replayed.
      if (type === "hello") { retry = 500; document.body.dataset.live = "connected"; if (!timer) timer = setTimeout(refresh, 0); }
      if (type !== "event") return;
      if (!timer) timer = setTimeout(refresh, 300); // one refresh per burst of events
    };
    socket.onclose = () => {
      document.body.dataset.live = "disconnected";
      if (status) status.textContent = said(status, "reconnectingText", "reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  drawHeatmap();
  drawUsage();
  connect();
})();
