// Operator console, Health page: re-read the server-rendered section every data-poll-s seconds
// (heartbeat ages move on their own, with no job event to announce them).
(function () {
  "use strict";
  document.querySelectorAll("[data-poll-src]").forEach((el) => {
    const every = Math.max(2, Number(el.dataset.pollS) || 10) * 1000;
    function poll() {
      fetch(el.dataset.pollSrc, {credentials: "same-origin"})
        .then((r) => (r.ok ? r.text() : null))
        .then((html) => {
          if (html !== null) {
            el.innerHTML = html;
            document.body.dataset.refreshed = String(Date.now());
          }
        })
        .catch(() => {})
        .finally(() => setTimeout(poll, every));
    }
    setTimeout(poll, every);
  });
})();
