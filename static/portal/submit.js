// Submit page: live quotes as the tenant types (debounced), the image form -> YAML, upload,
// and a Submit button per quoted option. Plain JS, no framework.
(function () {
  "use strict";
  const app = document.getElementById("submit-app");
  if (!app) return;
  const workspace = app.dataset.workspace;
  const editor = document.getElementById("spec-yaml");
  const errors = document.getElementById("spec-errors");
  const status = document.getElementById("quote-status");
  const table = document.getElementById("quote-table");
  const tbody = table.querySelector("tbody");
  let timer = null;
  let generation = 0;

  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrf()},
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await response.json(); } catch (e) { /* not JSON */ }
    return {ok: response.ok, status: response.status, data};
  }

  function showErrors(list) {
    errors.replaceChildren(...(list || []).map((e) => {
      const li = document.createElement("li");
      const where = e.line ? `line ${e.line}, col ${e.column}: ` : "";
      li.textContent = where + (e.field && !e.message.includes(e.field) ? `${e.field}: ` : "") + e.message;
      return li;
    }));
  }

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function renderQuote(quote) {
    tbody.replaceChildren();
    for (const o of quote.options) {
      const tr = document.createElement("tr");
      tr.dataset.option = o.id;
      if (o.cheapest) tr.className = "cheapest";
      const label = `${o.sharing} · ${o.gpu_model} · ${o.pool}${o.spot ? " · spot" : ""}${o.cheapest ? " ★ cheapest" : ""}`;
      tr.append(cell(label), cell(o.when), cell(o.price_per_hour, "price"), cell(o.price_per_hour_offpeak),
        cell(`${o.estimate_low}–${o.estimate_high} ${quote.currency}`, "estimate"), cell((o.tradeoffs || []).join("; ")));
      const td = document.createElement("td");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Submit";
      button.className = "submit-option";
      button.addEventListener("click", () => submitOption(o.id, button));
      td.append(button);
      tr.append(td);
      tbody.append(tr);
    }
    table.hidden = quote.options.length === 0;
    status.textContent = `${quote.options.length} options for ${quote.expected_duration_hours} h, in ${quote.currency}.` +
      (quote.unavailable && quote.unavailable.length ? ` Not offered: ${quote.unavailable.join("; ")}` : "");
  }

  async function refreshQuote() {
    const text = editor.value;
    const mine = ++generation;
    if (!text.trim()) { table.hidden = true; showErrors([]); return; }
    status.textContent = "Quoting…";
    const {ok, data} = await post("/api/v1/quotes/", {workspace, spec: text});
    if (mine !== generation) return; // a newer edit is being quoted
    if (ok) { showErrors([]); renderQuote(data); return; }
    table.hidden = true;
    status.textContent = "Fix the spec to see a quote.";
    showErrors(data.errors || [{message: `the server answered ${data.detail || "an error"}`}]);
  }

  function scheduleQuote() {
    clearTimeout(timer);
    timer = setTimeout(refreshQuote, 400);
  }

  async function submitOption(optionId, button) {
    button.disabled = true;
    const {ok, data} = await post("/api/v1/jobs/", {workspace, spec: editor.value, option: optionId});
    if (ok) { window.location.href = `/jobs/${data.id}/`; return; }
    button.disabled = false;
    showErrors(data.errors || [{message: "submission failed"}]);
  }

  async function formToYaml() {
    const form = {};
    for (const [key, value] of new FormData(document.getElementById("image-form"))) form[key] = value;
    const {ok, data} = await post("/api/v1/specs/image-form/", {workspace, form});
    if (ok) { editor.value = data.yaml; showErrors([]); scheduleQuote(); } else { showErrors(data.errors); }
  }

  editor.addEventListener("input", scheduleQuote);
  document.getElementById("spec-file").addEventListener("change", (event) => {
    const file = event.target.files[0];
    if (!file) return;
    if (file.size > 65536) { showErrors([{message: `${file.name} is ${file.size} bytes; specs are limited to 64 KiB`}]); return; }
    file.text().then((text) => { editor.value = text; refreshQuote(); });
  });
  for (const button of document.querySelectorAll("[data-example]")) {
    button.addEventListener("click", () => {
      editor.value = document.getElementById(`example-${button.dataset.example}`).textContent;
      refreshQuote();
    });
  }
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === tab);
      document.getElementById("tab-yaml").hidden = tab.dataset.tab !== "yaml";
      document.getElementById("tab-image").hidden = tab.dataset.tab !== "image";
    });
  }
  let formTimer = null;
  document.getElementById("image-form").addEventListener("input", () => {
    clearTimeout(formTimer);
    formTimer = setTimeout(formToYaml, 400);
  });
})();
