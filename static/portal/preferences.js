// Preferences: offer the zone this browser is set to, when it is one of the choices and not the one chosen.
(function () {
  "use strict";
  const select = document.getElementById("f-time-zone");
  const button = document.getElementById("use-browser-zone");
  if (!select || !button || !window.Intl) return;
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const offered = Array.from(select.options).some((option) => option.value === zone);
  if (!zone || !offered || select.value === zone) return;
  button.querySelector("span").textContent = zone;
  button.hidden = false;
  button.addEventListener("click", () => { select.value = zone; button.hidden = true; });
})();
