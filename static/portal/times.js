// Times a page writes itself (live updates) in the zone the server wrote the page's other times in:
// the viewer's, from <body data-tz>. Times arrive as ISO 8601 (the API's UTC, or with an offset).
(function () {
  "use strict";
  const FIELDS = {year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
                  second: "2-digit", hourCycle: "h23"};
  function formatter(timeZone) {
    try {
      return new Intl.DateTimeFormat("en-US", {...FIELDS, timeZone});
    } catch (error) { // a zone this browser does not know: UTC, as the API gives it
      return new Intl.DateTimeFormat("en-US", {...FIELDS, timeZone: "UTC"});
    }
  }
  const format = formatter(document.body.dataset.tz || "UTC");

  function parts(iso) {
    // Python writes microseconds; Date reliably reads milliseconds only.
    const date = new Date(String(iso).replace(/(\.\d{3})\d+/, "$1"));
    if (Number.isNaN(date.getTime())) return null;
    const out = {};
    for (const part of format.formatToParts(date)) out[part.type] = part.value;
    return out;
  }

  window.portalTimes = {
    zone: format.resolvedOptions().timeZone,
    // "2026-03-02 07:30:00", as the server's date:"Y-m-d H:i:s"
    dateTime(iso) {
      const p = iso && parts(iso);
      return p ? `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}` : "";
    },
    // "07:30:00", as the server's date:"H:i:s"
    time(iso) {
      const p = iso && parts(iso);
      return p ? `${p.hour}:${p.minute}:${p.second}` : "";
    },
  };
})();
