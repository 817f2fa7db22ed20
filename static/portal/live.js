// Live job updates over the workspace websocket: the jobs list and the job page change in place.
(function () {
  "use strict";
  const detail = document.getElementById("job-detail");
  const list = document.getElementById("jobs-table");
  const workspace = (detail || list || {}).dataset ? (detail || list).dataset.workspace : null;
  if (!workspace) return;
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  let retry = 500;

  function text(el, value) { if (el) el.textContent = value; }

  function setState(el, state) {
    if (!el) return;
    el.textContent = state;
    el.className = `state state-${state.toLowerCase()}`;
  }

  async function refreshJob(jobId) {
    const response = await fetch(`/api/v1/jobs/${jobId}/`, {credentials: "same-origin"});
    if (!response.ok) return;
    const job = await response.json();
    if (detail && String(job.id) === detail.dataset.job) showState(job);
    const cost = document.querySelector("#job-cost p");
    if (cost && job.cost_so_far !== null && job.final_cost === null) {
      cost.textContent = `Cost so far ${job.cost_so_far} ${job.currency || (job.quote && job.quote.currency) || ""}` +
        (job.quote ? ` · estimated at submission ${job.quote.estimate_low}–${job.quote.estimate_high} ${job.quote.currency}` : "");
    }
    const tbody = document.querySelector("#replicas-table tbody");
    if (!tbody) return;
    tbody.replaceChildren(...job.replicas.map((r) => {
      const tr = document.createElement("tr");
      for (const v of [`${r.role}-${r.index}`, r.state, r.node || "", (r.gpus || []).join(", "), r.slice_label,
        portalTimes.time(r.started), portalTimes.time(r.ended)]) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.append(td);
      }
      return tr;
    }));
  }

  async function refreshCost() {
    const response = await fetch(`/api/v1/jobs/${detail.dataset.job}/`, {credentials: "same-origin"});
    if (!response.ok) return;
    const job = await response.json();
    if (job.final_cost === null || job.final_cost === undefined) return;
    const box = document.querySelector("#job-cost p");
    if (box) box.textContent = `Final cost ${job.final_cost} ${job.currency}` +
      (job.quote ? ` · estimated at submission ${job.quote.estimate_low}–${job.quote.estimate_high} ${job.quote.currency}` : "");
  }

  function showState(job) {
    setState(document.getElementById("job-state"), job.state);
    const pending = document.getElementById("pending-reason");
    pending.hidden = !job.pending_reason;
    text(pending.querySelector("span"), job.pending_reason || "");
  }

  function showRow(row, job) {
    setState(row.querySelector('[data-field="state"]'), job.state);
    text(row.querySelector('[data-field="pending_reason"]'), job.pending_reason || "");
  }

  // Events are not replayed: those published before the socket joined its group (between the
  // page's render and the connection, or while reconnecting) are read back from the API once
  // the server says it has joined ("hello").
  async function catchUp() {
    if (detail) { refreshJob(detail.dataset.job); return; }
    const response = await fetch(`/api/v1/jobs/?workspace=${encodeURIComponent(workspace)}&limit=100`,
      {credentials: "same-origin"});
    if (!response.ok) return;
    for (const job of (await response.json()).results || []) {
      const row = list.querySelector(`tr[data-job="${job.id}"]`);
      if (row) showRow(row, job);
    }
  }

  function onDetail(event) {
    if (String(event.job) !== detail.dataset.job) return;
    showState(event);
    const li = document.createElement("li");
    const time = document.createElement("time");
    time.dateTime = event.time;
    time.textContent = portalTimes.dateTime(event.time);
    li.append(time, ` ${event.kind} ${event.state}${event.reason ? " — " + event.reason : ""}`);
    document.getElementById("events").append(li);
    if (["Succeeded", "Failed", "Cancelled"].includes(event.state)) {
      const cancel = document.getElementById("cancel-job");
      if (cancel) cancel.closest("form").remove();
      if (logBox) { logBox.dataset.active = "0"; clearTimeout(logTimer); }
      refreshCost();
    }
    refreshJob(event.job);
  }

  function onList(event) {
    const row = list.querySelector(`tr[data-job="${event.job}"]`);
    if (!row) { window.location.reload(); return; } // a new job: the server renders it
    showRow(row, event);
    if (event.replicas !== undefined) text(row.querySelector('[data-field="replicas"]'), event.replicas);
  }

  const logBox = document.getElementById("job-log");
  let logTimer = null;
  function pollLog() {
    if (!logBox || logBox.dataset.active !== "1") return;
    fetch(logBox.dataset.url, {credentials: "same-origin"}).then((r) => (r.ok ? r.text() : null)).then((text) => {
      if (text !== null) { logBox.textContent = text; logBox.scrollTop = logBox.scrollHeight; }
      refreshJob(detail.dataset.job);
      logTimer = setTimeout(pollLog, 2000);
    });
  }
  pollLog();

  function connect() {
    const path = detail ? `/ws/jobs/${detail.dataset.job}/` : `/ws/workspaces/${workspace}/`;
    const socket = new WebSocket(`${scheme}://${window.location.host}${path}`);
    socket.onopen = () => { document.body.dataset.live = "open"; };
    socket.onmessage = (message) => {
      const data = JSON.parse(message.data);
      // "connected" only once the server has joined the group: while Redis is down a socket
      // opens, says "paused" and closes, and the retries must keep backing off.
      if (data.type === "hello") { retry = 500; document.body.dataset.live = "connected"; catchUp(); }
      if (data.type !== "event") return;
      if (detail) onDetail(data.event);
      if (list) onList(data.event);
    };
    socket.onclose = () => {
      document.body.dataset.live = "disconnected";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
})();
