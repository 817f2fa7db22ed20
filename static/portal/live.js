// Live job updates over the workspace websocket: the jobs list and the job page change in place.
(function () {
  "use strict";
  const detail = document.getElementById("job-detail");
  const listHolder = document.getElementById("jobs-live");
  const list = listHolder && document.getElementById("jobs-table") ? listHolder : null; // rows are re-rendered inside
  const workspace = detail ? detail.dataset.workspace :
    (list ? document.getElementById("jobs-table").dataset.workspace : null);
  if (!workspace) return;
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  let retry = 500;

  function text(el, value) { if (el) el.textContent = value; }

  // the states' words in the page's language (data-state-words), the API's value when a word is missing
  const wordsHolder = detail || document.getElementById("jobs-table");
  const stateWords = wordsHolder && wordsHolder.dataset.stateWords ? JSON.parse(wordsHolder.dataset.stateWords) : {};

  function setState(el, state) {
    if (!el) return;
    el.textContent = stateWords[state] || state;
    el.className = `state state-${state.toLowerCase()}`;
  }

  async function refreshJob(jobId) {
    // the API follows Accept-Language only: ask in the page's language (pending_reason_text)
    const response = await fetch(`/api/v1/jobs/${jobId}/`, {
      credentials: "same-origin", headers: {"Accept-Language": document.documentElement.lang || "en"}});
    if (!response.ok) return;
    const job = await response.json();
    if (detail && String(job.id) === detail.dataset.job) { showState(job); refreshTiming(); }
    const tbody = document.querySelector("#replicas-table tbody");
    if (!tbody) return;
    tbody.replaceChildren(...job.replicas.map((r) => {
      const tr = document.createElement("tr");
      for (const v of [`${r.role}-${r.index}`, stateWords[r.state] || r.state, r.node || "", (r.gpus || []).join(", "), r.slice_label,
        portalTimes.time(r.started), portalTimes.time(r.ended)]) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.append(td);
      }
      return tr;
    }));
  }

  // "waiting 2 min", "running 5 min", "ran 42 min": the server's words, read again as the job moves on
  async function refreshTiming() {
    const timing = document.getElementById("job-timing");
    if (!timing || !timing.dataset.src) return;
    const response = await fetch(timing.dataset.src, {credentials: "same-origin"});
    if (response.ok) timing.textContent = (await response.text()).trim();
  }

  // The page's other scripts re-read what they show (the job page's cost and charts, job_usage.js;
  // the list's rows, job_list.js) when something happened.
  function changed(name) { document.dispatchEvent(new CustomEvent(name)); }

  function showState(job) {
    setState(document.getElementById("job-state"), job.state);
    const pending = document.getElementById("pending-reason");
    pending.hidden = !job.pending_reason;
    // the API's reason in the reader's language; a websocket event carries the English one until then
    text(pending.querySelector("span"), job.pending_reason_text || job.pending_reason || "");
  }

  function showRow(row, job) {
    setState(row.querySelector('[data-field="state"]'), job.state);
    text(row.querySelector('[data-field="pending_reason"]'), job.pending_reason || "");
  }

  // Events are not replayed: those published before the socket joined its group (between the
  // page's render and the connection, or while reconnecting) are read back from the API once
  // the server says it has joined ("hello").
  async function catchUp() {
    if (detail) { refreshJob(detail.dataset.job); refreshEvents(detail.dataset.job); changed("job:changed"); return; }
    changed("jobs:changed"); // the list's rows are read again from the server, with its filters and page
  }

  function eventItem(event) {
    const li = document.createElement("li");
    const time = document.createElement("time");
    time.dateTime = event.time;
    time.textContent = portalTimes.dateTime(event.time);
    const kind = document.createElement("strong");
    kind.dataset.kind = event.kind;
    kind.textContent = event.kind_text || event.kind;
    const reason = event.reason_text || event.reason;
    li.append(time, " ", kind, ` ${stateWords[event.state] || event.state} ${reason ? "— " + reason : ""}`);
    return li;
  }

  // The websocket's event carries the English reason: the list is read again from the API in the
  // page's language (kind_text, reason_text), the English line standing in until it answers.
  async function refreshEvents(jobId) {
    const response = await fetch(`/api/v1/jobs/${jobId}/events/`, {
      credentials: "same-origin", headers: {"Accept-Language": document.documentElement.lang || "en"}});
    if (!response.ok) return;
    const events = await response.json();
    document.getElementById("events").replaceChildren(...events.map(eventItem));
  }

  function onDetail(event) {
    if (String(event.job) !== detail.dataset.job) return;
    showState(event);
    document.getElementById("events").append(eventItem(event));
    refreshEvents(event.job);
    if (["Succeeded", "Failed", "Cancelled"].includes(event.state)) {
      const cancel = document.getElementById("cancel-job");
      if (cancel) cancel.closest("form").remove();
      if (logBox && logBox.dataset.active === "1") { logBox.dataset.active = "0"; clearTimeout(logTimer); readLog(); }
    }
    refreshJob(event.job);
    changed("job:changed");
  }

  function onList(event) {
    const row = list.querySelector(`tr[data-job="${event.job}"]`);
    if (row) showRow(row, event);
    changed("jobs:changed"); // a new job, a cost, a job that leaves the filter: the server renders them
  }

  const logBox = document.getElementById("job-log");
  let logTimer = null;
  function readLog() {
    return fetch(logBox.dataset.url, {credentials: "same-origin"}).then((r) => (r.ok ? r.text() : null)).then((text) => {
      if (text !== null) { logBox.textContent = text; logBox.scrollTop = logBox.scrollHeight; }
    });
  }
  function pollLog() {
    if (!logBox || logBox.dataset.active !== "1") return;
    readLog().then(() => {
      refreshJob(detail.dataset.job);
      // the job ended meanwhile: the lines written before its end are read once more (it stops here)
      if (logBox.dataset.active === "1") logTimer = setTimeout(pollLog, 2000);
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
