// Submit page, made live: the YAML editor (vendored CodeMirror, static/vendor/README.md) with error
// markers, the image form (a tab per kind: training, notebook, inference) and the YAML kept in step
// both ways, examples, upload, and a quote that follows every edit and the duration (debounced).
// Submitting an option posts the page's form, as it does without JavaScript. Plain JS, no framework.
// Words come from the form's data-*-text attributes (the reader's language), English when absent; the
// quote API is asked in the page's language for the trade-offs and the pools' refusals.
(function () {
  "use strict";
  const page = document.getElementById("submit-form");
  if (!page) return;
  const said = (key, english) => page.dataset[key] || english;
  // "%(name)s" parts of a text the page gave in its language
  function fill(text, values) {
    return text.replace(/%\((\w+)\)s/g, (part, name) => (name in values ? String(values[name]) : part));
  }
  const saidWith = (key, english, values) => fill(said(key, english), values);
  const workspace = page.dataset.workspace;
  const textarea = document.getElementById("spec-yaml");
  const errors = document.getElementById("spec-errors");
  const status = document.getElementById("quote-status");
  const table = document.getElementById("quote-table");
  const tbody = table.querySelector("tbody");
  const assumption = document.getElementById("quote-assumption");
  const unavailable = document.getElementById("quote-unavailable");
  const commonNote = document.getElementById("quote-common");
  const pullsNote = document.getElementById("quote-pulls");
  const duration = document.getElementById("duration-hours");
  // One tab and one fieldset per kind that has one (the page writes them from scheduling.kinds).
  const kindForms = Object.fromEntries([...document.querySelectorAll("#tab-image fieldset.image-form[data-kind]")]
    .map((fieldset) => [fieldset.dataset.kind, fieldset]));
  const kindTabs = document.getElementById("kind-tabs");
  const defaultKind = kindTabs.querySelector(".tab").dataset.kind;
  const preview = document.getElementById("form-yaml-preview");
  const notShown = document.getElementById("form-not-shown");
  const examples = JSON.parse(document.getElementById("submit-examples").textContent);
  const texts = JSON.parse(document.getElementById("submit-texts").textContent);
  const quotePanel = document.getElementById("quote-panel");
  let kind = defaultKind; // the image form's tab
  const DEBOUNCE_MS = 400;

  // The editor, or the plain textarea when the bundle did not load.
  const editor = window.GpuEditor
    ? window.GpuEditor.create(textarea, {onChange: () => schedule(refreshFromYaml), label: said("editorLabelText", "Task YAML")})
    : {
      getValue: () => textarea.value,
      setValue(text, {silent = false} = {}) { textarea.value = text; if (!silent) schedule(refreshFromYaml); },
      setDiagnostics: () => 0, goTo: () => textarea.focus(),
    };
  if (!window.GpuEditor) textarea.addEventListener("input", () => schedule(refreshFromYaml));

  function showPreview() {
    preview.textContent = editor.getValue();
  }

  let timer = null;
  let generation = 0; // answers to older edits are dropped

  function schedule(task) {
    clearTimeout(timer);
    timer = setTimeout(task, DEBOUNCE_MS);
  }

  function csrf() {
    const field = page.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  async function post(url, body) {
    try {
      const response = await fetch(url, {
        method: "POST", credentials: "same-origin",
        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf(), "Accept": "application/json",
          "Accept-Language": document.documentElement.lang || "en"}, // the API follows Accept-Language only
        body: JSON.stringify(body),
      });
      let data = {};
      try { data = await response.json(); } catch (e) { /* not JSON */ }
      return {ok: response.ok, status: response.status, data};
    } catch (e) {
      return {ok: false, status: 0,
        data: {errors: [{message: said("unreachableText", "the server could not be reached; try again")}]}};
    }
  }

  // ------------------------------------------------------------------ errors

  function showErrors(list) {
    const items = list || [];
    errors.replaceChildren(...items.map((e) => {
      const li = document.createElement("li");
      if (e.field) li.dataset.field = e.field;
      const field = e.field && !e.line && !String(e.message).includes(e.field) ? `${e.field}: ` : "";
      if (e.line) {
        li.dataset.line = e.line;
        li.dataset.column = e.column || "";
        const at = document.createElement("a");
        at.href = "#spec-yaml";
        at.className = "error-at";
        at.textContent = saidWith("lineText", "line %(line)s, col %(column)s", {line: e.line, column: e.column});
        li.append(at, `: ${field}${e.message}`);
      } else {
        li.textContent = field + e.message;
      }
      return li;
    }));
    editor.setDiagnostics(items.filter((e) => e.line));
  }

  errors.addEventListener("click", (event) => {
    const at = event.target.closest("a.error-at");
    if (!at) return;
    event.preventDefault();
    const li = at.closest("li");
    editor.goTo(Number(li.dataset.line), Number(li.dataset.column) || 0);
  });

  // ------------------------------------------------------------------ the quote

  function durationHours() {
    const value = Number(duration.value);
    return duration.value.trim() && Number.isFinite(value) && value > 0 ? duration.value.trim() : null;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function cell(label, className) {
    const td = el("td", className);
    if (label) td.dataset.label = label;
    return td;
  }

  const ENGLISH_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec";
  const pageMonths = said("monthsText", ENGLISH_MONTHS).split(/\s+/);
  const MONTHS = pageMonths.length === 12 ? pageMonths : ENGLISH_MONTHS.split(" ");
  const MAX_TAGS = 3; // as portal/submit_page.py
  const BADGED = ["waits_for_off_peak", "spot"]; // codes the row's off-peak and spot badges say

  function startText(o) {
    if (o.expected_start === null || o.expected_start === undefined) return said("queuedText", "queued");
    if (o.expected_start === "now") return said("nowText", "now");
    // "Nov 25, 00:00" in the viewer's zone, as the server writes it (portal/templatetags/money.py day_time)
    const text = window.portalTimes ? window.portalTimes.dateTime(o.expected_start) : "";
    const m = text.match(/^\d{4}-(\d{2})-(\d{2}) (\d{2}:\d{2})/);
    return m ? saidWith("startText", "%(month)s %(day)s, %(time)s",
      {month: MONTHS[Number(m[1]) - 1], day: Number(m[2]), time: m[3]}) : o.expected_start;
  }

  // An amount as the money filter writes it (static/portal/formats.js): ¥1,234.50, $0.85.
  const money = (amount, currency) => window.portalFormats.money(amount, currency) || `${amount} ${currency}`;
  const rate = (amount, currency) => window.portalFormats.rate(amount, currency) || `${amount} ${currency}`;

  // An option's trade-offs in the page's language (the API's *_text), else its English ones.
  const tradeoffText = (o, i) => (o.tradeoffs_text && o.tradeoffs_text[i]) || o.tradeoffs[i];
  const tagText = (o, i) => (o.tradeoff_tags_text && o.tradeoff_tags_text[i]) || (o.tradeoff_tags || [])[i];
  const codeOf = (o, i) => ((o.tradeoff_codes || [])[i] || {}).code;

  // Trade-offs every option shares are said once above the table (compared by their English text).
  function commonTradeoffs(options) {
    if (options.length < 2) return [];
    const [first, ...others] = options;
    return first.tradeoffs.filter((t) => others.every((o) => o.tradeoffs.includes(t)));
  }

  function row(o, quote, common) {
    const tr = el("tr");
    tr.dataset.option = o.id;
    tr.classList.toggle("cheapest", o.cheapest);
    tr.classList.toggle("earliest", o.earliest);

    const option = cell(said("optionText", "Option"), "option");
    option.append(el("strong", null, o.sharing));
    if (o.spot) option.append(" ", el("span", "badge spot", said("spotText", "spot")));
    // off-peak priced: an off-peak start, or "now" when now is already inside an off-peak window
    if (o.when === "off-peak" || (o.when === "now" && o.starts_offpeak)) {
      option.append(" ", el("span", "badge offpeak", said("offPeakText", "off-peak")));
    }
    if (o.when === "deadline") option.append(" ", el("span", "badge offpeak", said("byDeadlineText", "by the deadline")));
    option.append(el("br"), el("span", "hint", `${o.gpu_model} · ${o.pool}`));
    if (o.cheapest) option.append(" ", el("span", "badge flag-cheapest", said("cheapestText", "cheapest")));
    if (o.earliest) option.append(" ", el("span", "badge flag-earliest", said("earliestText", "earliest")));

    const starts = cell(said("startsText", "Starts"), "starts");
    if (o.expected_start && o.expected_start !== "now") {
      const time = el("time", null, startText(o));
      time.dateTime = o.expected_start;
      starts.append(time);
    } else {
      starts.textContent = startText(o);
    }

    const total = cell(said("totalText", "Total"), "num total");
    total.append(money(o.total, quote.currency));
    if (o.estimate_high !== o.estimate_low) {
      total.append(el("br"), el("span", "hint", saidWith("upToText", "up to %(high)s",
        {high: money(o.estimate_high, quote.currency)})));
    }
    const note = rateNote(o, quote);
    if (note) total.append(el("br"), el("span", "hint rate", note));
    if (quote.schedule && o.month_total) {  // a scheduled spec: what a month of its runs costs
      total.append(el("br"), el("span", "hint month", saidWith("monthOfRunsText", "%(month)s a month (%(runs)s runs)",
        {month: money(o.month_total, quote.currency), runs: quote.schedule.runs_per_month})));
    }

    // the total over the hours it assumes, so that the two agree (portal/submit_page.py per_hour)
    const perHour = cell(said("perHourText", "Per hour"), "num per-hour");
    const hours = Number(o.duration_hours);
    perHour.textContent = hours > 0 ? rate(Number(o.total) / hours, quote.currency) : "—";
    const saving = cell(said("savingText", "Saving vs whole GPUs"), "num saving");
    saving.textContent = o.saving_percent && Number(o.saving) > 0
      ? `${money(o.saving, quote.currency)} (${o.saving_percent}%)` : "—";

    const tradeoffs = cell(said("tradeoffsText", "Trade-offs"), "tradeoffs");
    const own = (o.tradeoffs || []).map((t, i) => i).filter((i) => !common.includes(o.tradeoffs[i]));
    if (own.length) {
      const details = el("details");
      const summary = el("summary");
      summary.title = said("showTradeoffsText", "Show the trade-offs in full");
      // the short names of this row's own trade-offs (tradeoff_tags[i] names tradeoffs[i]), each once
      const mine = [...new Set(own.filter((i) => !BADGED.includes(codeOf(o, i))).map((i) => tagText(o, i))
        .filter((tag) => tag))];
      for (const tag of mine.slice(0, MAX_TAGS)) summary.append(el("span", "chip", tag));
      if (!mine.length) summary.append(el("span", "hint", said("detailsText", "details")));
      if (mine.length > MAX_TAGS) summary.append(el("span", "chip more", `+${mine.length - MAX_TAGS}`));
      const list = el("ul");
      for (const i of own) list.append(el("li", null, tradeoffText(o, i)));
      details.append(summary, list);
      tradeoffs.append(details);
    } else {
      tradeoffs.append(el("span", "hint", said("noneText", "none")));
    }

    const act = cell(null, "act");
    const button = el("button", "submit-option", said("submitText", "Submit"));
    button.type = "submit";
    button.name = "option";
    button.value = o.id;
    act.append(button);
    tr.append(option, starts, total, perHour, saving, tradeoffs, act);
    return tr;
  }

  // The quote's kind says how its rates read: a notebook per hour; a service per hour at its fewest and at
  // its most replicas.
  function rateNote(o, quote) {
    const currency = quote.currency;
    if (quote.rates === "per-hour") return fill(texts["per-hour"], {price: rate(o.price_per_hour, currency)});
    if (quote.rates !== "per-replicas" || !o.roles || !o.roles.length) return "";
    const role = o.roles[0];
    const low = role.min_replicas;
    const high = role.max_replicas;
    const figures = {low: rate(o.price_per_hour, currency), min: low, high: rate(o.price_per_hour_max, currency),
      max: high};
    if (low === 1 || high < 1) return fill(texts["per-replicas"], figures);
    // a service that may scale to zero: one replica too, and each for the hours quoted (k replicas cost k times one)
    const perHour = fill(texts["per-replicas-one"], {...figures, one: rate(role.price_per_hour, currency)});
    const forHours = fill(texts["per-replicas-hours"], {hours: o.duration_hours, min: low, max: high,
      low: money(o.estimate_low, currency), one: money(Number(o.estimate_high) / high, currency),
      high: money(o.estimate_high, currency)});
    return `${perHour}; ${forHours}`;
  }

  function renderQuote(quote) {
    quotePanel.dataset.kind = quote.kind || defaultKind;
    const common = commonTradeoffs(quote.options);
    const first = quote.options[0];
    const commonText = common.map((t) => tradeoffText(first, first.tradeoffs.indexOf(t)));
    commonNote.hidden = common.length === 0;
    commonNote.textContent = common.length
      ? `${said("everyOptionText", "Every option:")} ${commonText.join(said("betweenText", "; "))}.` : "";
    tbody.replaceChildren(...quote.options.map((o) => row(o, quote, common)));
    table.hidden = quote.options.length === 0;
    const hours = quote.duration_hours;
    assumption.textContent = saidWith("assumingText", "assuming %(hours)s h", {hours});
    const n = quote.options.length;
    status.className = "";
    status.textContent = n === 1
      ? saidWith("statusOneText", "%(n)s option, assuming %(hours)s h, in %(currency)s.", {n, hours, currency: quote.currency})
      : saidWith("statusOtherText", "%(n)s options, assuming %(hours)s h, in %(currency)s.", {n, hours, currency: quote.currency});
    const pulls = quote.image_pulls || [];  // which registry credential pulls each image
    if (pullsNote) {
      pullsNote.hidden = pulls.length === 0;
      pullsNote.replaceChildren(...pulls.map((p) => {
        const span = el("span", null, `${p.text}. `);
        span.dataset.registry = p.registry;
        span.dataset.credential = p.credential || "";
        return span;
      }));
    }
    const english = quote.unavailable || [];
    const list = english.map((u, i) => (quote.unavailable_text && quote.unavailable_text[i]) || u);
    unavailable.hidden = list.length === 0;
    unavailable.querySelector("summary").textContent = saidWith("notOfferedText", "Not offered (%(n)s)", {n: list.length});
    unavailable.querySelector("ul").replaceChildren(...list.map((u) => el("li", null, u)));
  }

  function clearQuote(message) {
    table.hidden = true;
    commonNote.hidden = true;
    if (pullsNote) pullsNote.hidden = true;
    tbody.replaceChildren();
    unavailable.hidden = true;
    status.className = "empty";
    status.textContent = message;
  }

  async function refreshQuote(mine) {
    const text = editor.getValue();
    if (!text.trim()) {
      clearQuote(said("emptyText", "Type, upload or pick an example spec to see what each option costs."));
      showErrors([]);
      return;
    }
    const body = {workspace, spec: text};
    const hours = durationHours();
    if (hours) body.duration_hours = hours;
    status.textContent = said("quotingText", "Quoting…");
    const {ok, data} = await post("/api/v1/quotes/", body);
    if (mine !== generation) return;
    if (ok) { showErrors([]); renderQuote(data); return; }
    clearQuote(said("fixSpecText", "Fix the spec to see a quote."));
    showErrors(data.errors && data.errors.length ? data.errors
      : [{message: data.detail || said("quoteFailedText", "the quote failed")}]);
  }

  // ------------------------------------------------------------------ YAML -> form

  function fields() {
    return kindForms[kind].querySelectorAll("[data-field]");
  }

  // The tab of a kind: its fieldset shown, the others hidden (their fields are not posted).
  function showKind(name) {
    kind = kindForms[name] ? name : defaultKind;
    for (const [key, fieldset] of Object.entries(kindForms)) fieldset.hidden = key !== kind;
    for (const tab of kindTabs.querySelectorAll(".tab")) {
      tab.classList.toggle("active", tab.dataset.kind === kind);
      tab.setAttribute("aria-selected", String(tab.dataset.kind === kind));
    }
    for (const node of document.querySelectorAll("#tab-image [data-kind].hint")) node.hidden = node.dataset.kind !== kind;
    showServerFields();
  }

  // A custom server names its port, health path and command; vLLM and Triton have their own.
  function showServerFields() {
    const form = kindForms[kind];
    const server = form.querySelector("[data-field='server']");
    if (!server) return;
    const custom = server.value === "custom";
    for (const label of form.querySelectorAll(".custom-only")) {
      label.hidden = !custom && !label.querySelector("[data-field]").value;
    }
  }

  function fillForm(values, hidden) {
    if (values.kind && values.kind !== kind) showKind(values.kind);
    for (const input of fields()) {
      if (input === document.activeElement) continue; // never under the tenant's cursor
      const value = values[input.dataset.field];
      if (value === undefined) continue;
      if (input.tagName === "SELECT" && value && ![...input.options].some((o) => o.value === value)) {
        input.append(new Option(value, value)); // a queue or pool the page did not list
      }
      input.value = value;
    }
    showServerFields();
    notShown.hidden = !hidden.length;
    notShown.textContent = hidden.length
      ? saidWith("notShownText", "The form does not show %(fields)s of this spec: editing the form rewrites the YAML "
        + "without them.", {fields: hidden.join(", ")})
      : "";
  }

  async function refreshFromYaml() {
    const mine = ++generation;
    const text = editor.getValue();
    if (text.trim()) {
      const {ok, data} = await post("/api/v1/specs/image-form/values/", {workspace, spec: text});
      if (mine !== generation) return;
      if (ok) {
        fillForm(data.form, data.not_in_form || []);
        if (data.duration_hours && duration !== document.activeElement) duration.value = data.duration_hours;
      }
    }
    showPreview();
    await refreshQuote(mine);
  }

  // ------------------------------------------------------------------ form -> YAML

  async function refreshFromForm() {
    const mine = ++generation;
    const form = {kind};
    for (const input of fields()) form[input.dataset.field] = input.value;
    const hours = durationHours();
    if (hours) form.expectedDuration = `${Math.round(Number(hours) * 60)}m`;
    const {ok, data} = await post("/api/v1/specs/image-form/", {workspace, form});
    if (mine !== generation) return;
    if (!ok) { clearQuote(said("fixFormText", "Fix the form to see a quote.")); showErrors(data.errors); return; }
    editor.setValue(data.yaml, {silent: true});
    showPreview();
    notShown.hidden = true;
    await refreshQuote(mine);
  }

  for (const fieldset of Object.values(kindForms)) {
    fieldset.addEventListener("input", () => schedule(refreshFromForm));
    fieldset.addEventListener("change", () => schedule(refreshFromForm));
  }
  for (const server of document.querySelectorAll("#tab-image fieldset [data-field='server']")) {
    server.addEventListener("change", showServerFields);
  }

  // Picking a kind writes its YAML at once. A kind that runs until it is stopped (a notebook) names the hours
  // it is quoted for (data-quote-hours: one, its price per hour) unless the tenant set a duration.
  const pageHours = duration.value;
  let durationSet = false;
  for (const tab of kindTabs.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      if (tab.dataset.kind === kind) return;
      showKind(tab.dataset.kind);
      if (!durationSet) duration.value = tab.dataset.quoteHours || pageHours;
      clearTimeout(timer);
      refreshFromForm();
    });
  }

  // ------------------------------------------------------------------ duration

  // A top-level `expectedDuration:` line follows the box, so the YAML says what is quoted.
  const DURATION_LINE = /^expectedDuration:[^\S\n]*([^#\n]*?)([^\S\n]*#.*)?$/m;

  duration.addEventListener("input", () => {
    durationSet = true;
    const hours = durationHours();
    const text = editor.getValue();
    if (hours && DURATION_LINE.test(text)) {
      const minutes = Math.round(Number(hours) * 60);
      const value = minutes % 60 === 0 ? `${minutes / 60}h` : `${minutes}m`;
      editor.setValue(text.replace(DURATION_LINE, (line, old, comment) => `expectedDuration: ${value}${comment || ""}`),
        {silent: true});
    }
    schedule(() => refreshQuote(++generation));
  });

  // ------------------------------------------------------------------ examples, upload, tabs

  for (const link of document.querySelectorAll("[data-example]")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      editor.setValue(examples[link.dataset.example]);
      clearTimeout(timer);
      refreshFromYaml();
    });
  }

  const upload = document.getElementById("spec-file");
  document.getElementById("upload-label").hidden = false;
  upload.addEventListener("change", () => {
    const file = upload.files[0];
    if (!file) return;
    if (file.size > 65536) {
      showErrors([{message: saidWith("tooLargeText", "%(name)s is %(size)s bytes; specs are limited to 64 KiB",
        {name: file.name, size: file.size})}]);
      return;
    }
    file.text().then((text) => { editor.setValue(text); clearTimeout(timer); refreshFromYaml(); });
  });

  const tabs = document.getElementById("spec-tabs");
  tabs.hidden = false;
  for (const tab of tabs.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      for (const t of tabs.querySelectorAll(".tab")) {
        t.classList.toggle("active", t === tab);
        t.setAttribute("aria-selected", String(t === tab));
      }
      document.getElementById("tab-yaml").hidden = tab.dataset.tab !== "yaml";
      document.getElementById("tab-image").hidden = tab.dataset.tab !== "image";
      showPreview();
    });
  }
  showKind(quotePanel.dataset.kind || defaultKind);

  // ------------------------------------------------------------------ the form itself

  // The quote follows every edit, so the plain form's Quote button is not needed; Enter in the
  // duration box re-quotes rather than submitting an option.
  document.getElementById("quote-button").hidden = true;
  page.addEventListener("submit", (event) => {
    if (event.submitter && event.submitter.name === "option") {
      for (const button of page.querySelectorAll("button.submit-option")) button.disabled = button !== event.submitter;
      return; // a real post: the server quotes again, submits the option and opens the job
    }
    event.preventDefault();
    clearTimeout(timer);
    refreshQuote(++generation);
  });

  // Errors the server rendered get their markers; a pre-filled spec fills in the form.
  const rendered = [...errors.querySelectorAll("li[data-line]")].map((li) => ({
    line: Number(li.dataset.line), column: Number(li.dataset.column) || 0, message: li.textContent,
  }));
  editor.setDiagnostics(rendered);
  if (editor.getValue().trim()) refreshFromYaml();
})();
