// The jobs list: re-reads its rows from the server (its filters and page kept) when live.js says a job
// changed, and keeps the jobs ticked for "Cancel selected jobs…" across those refreshes.
(function () {
  "use strict";
  const holder = document.getElementById("jobs-live");
  const bulk = document.getElementById("bulk-cancel");
  const button = document.getElementById("bulk-cancel-button");
  const status = document.getElementById("bulk-selected");
  if (!holder) return;
  const picked = new Set();
  let timer = null;

  function boxes() { return Array.from(holder.querySelectorAll("input.select-job")); }

  function show() {
    for (const box of boxes()) box.checked = picked.has(box.value);
    const all = document.getElementById("select-all");
    if (all) {
      const shown = boxes();
      all.hidden = shown.length === 0;
      all.checked = shown.length > 0 && shown.every((b) => b.checked);
    }
    if (button) button.disabled = picked.size === 0;
    if (status) {
      // the words come from the page (the reader's language), English when absent
      const said = (key, english) => (status.dataset[key] || english).replace("{count}", picked.size);
      status.textContent = picked.size
        ? (picked.size > 1 ? said("manyText", "{count} jobs selected; you confirm on the next page.")
          : said("oneText", "{count} job selected; you confirm on the next page."))
        : said("noneText", "Tick the jobs to cancel (those not ended); you confirm on the next page.");
    }
  }

  holder.addEventListener("change", (event) => {
    const box = event.target;
    if (box.id === "select-all") {
      for (const b of boxes()) { if (box.checked) picked.add(b.value); else picked.delete(b.value); }
    } else if (box.classList.contains("select-job")) {
      if (box.checked) picked.add(box.value); else picked.delete(box.value);
    }
    show();
  });

  // A ticked job that is no longer on the page (it ended, or left the filter) is still sent; the
  // confirmation page says which cannot be cancelled.
  if (bulk) {
    bulk.addEventListener("submit", () => {
      bulk.querySelectorAll("input.picked-elsewhere").forEach((el) => el.remove());
      const shown = new Set(boxes().map((b) => b.value));
      for (const id of picked) {
        if (shown.has(id)) continue;
        const input = document.createElement("input");
        Object.assign(input, {type: "hidden", name: "job", value: id, className: "picked-elsewhere"});
        bulk.append(input);
      }
    });
  }

  function refresh() {
    timer = null;
    fetch(holder.dataset.liveSrc, {credentials: "same-origin"})
      .then((r) => (r.ok ? r.text() : null))
      .then((html) => {
        if (html === null) return;
        holder.innerHTML = html;
        show();
        document.body.dataset.refreshed = String(Date.now());
      });
  }

  document.addEventListener("jobs:changed", () => { if (!timer) timer = setTimeout(refresh, 300); });
  show();
})();
