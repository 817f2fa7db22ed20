// Operators' cluster page: re-render the map (server-side) whenever a job event arrives.
(function () {
  "use strict";
  const map = document.getElementById("cluster-map");
  if (!map) return;
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  let pending = null;
  let retry = 500;

  function refresh() {
    pending = null;
    fetch("/cluster/?partial=1", {credentials: "same-origin"})
      .then((r) => (r.ok ? r.text() : null))
      .then((html) => { if (html !== null) map.innerHTML = html; });
  }

  function connect() {
    const socket = new WebSocket(`${scheme}://${window.location.host}/ws/cluster/`);
    socket.onopen = () => { document.body.dataset.live = "open"; };
    socket.onmessage = (message) => {
      const type = JSON.parse(message.data).type;
      // Joined (see live.js): re-read the map, events sent while the socket was down are not replayed.
      if (type === "hello") { retry = 500; document.body.dataset.live = "connected"; refresh(); }
      if (type !== "event") return;
      if (!pending) pending = setTimeout(refresh, 300); // one refresh per burst of events
    };
    socket.onclose = () => { document.body.dataset.live = "disconnected"; setTimeout(connect, retry); retry = Math.min(retry * 2, 10000); };
  }
  connect();
})();
