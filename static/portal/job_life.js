// The job page's attempts: read again whenever live.js says the job changed (a run ended, a retry began).
(function () {
  "use strict";
  const holder = document.getElementById("job-life-live");
  if (!holder) return;
  let soon = null;

  async function refresh() {
    soon = null;
    const response = await fetch(holder.dataset.src, {credentials: "same-origin"});
    if (response.ok) holder.innerHTML = await response.text();
  }

  document.addEventListener("job:changed", () => { if (!soon) soon = setTimeout(refresh, 300); });
})();
