// The "live updates paused" banner: shown while a live page's socket is down (Redis or the server
// unreachable); live.js, cluster.js and console.js reconnect and set body[data-live].
(function () {
  "use strict";
  const banner = document.getElementById("live-banner");
  if (!banner) return;
  const show = () => { banner.hidden = document.body.dataset.live !== "disconnected"; };
  new MutationObserver(show).observe(document.body, {attributes: true, attributeFilter: ["data-live"]});
  show();
})();
