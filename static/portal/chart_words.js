// The charts' date axes in the page's language: plotly's month and weekday names from the catalogue
// (the chart-words JSON the page embeds, templates/_plotly.html), set as every chart's locale.
(function () {
  "use strict";
  const holder = document.getElementById("chart-words");
  if (!holder || !window.Plotly) return;
  const words = JSON.parse(holder.textContent);
  if (!words.language || words.language === "en") return;
  const zh = words.language.startsWith("zh");
  window.Plotly.register({
    moduleType: "locale", name: words.language, dictionary: {},
    format: {
      months: words.months, shortMonths: words.months, days: words.days, shortDays: words.days,
      // "11月25日" rather than "11月 25": the day after the month as the language writes it
      ...(zh ? {date: "%Y-%m-%d"} : {}),
    },
  });
  window.Plotly.setPlotConfig({locale: words.language});
})();
