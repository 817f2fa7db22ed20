// Amounts and sizes a page writes itself, as the server writes them (scheduling/formats.py):
// money in the page's language (<html lang>) with the currency's narrow symbol, ¥19,705.15 or $0.85,
// two places (a price per hour up to four: $0.424); a size in its largest whole binary unit, 80Gi.
(function () {
  "use strict";
  const language = document.documentElement.lang || "en";
  const cache = {};

  function moneyFormat(currency, places) {
    const key = `${currency} ${places}`;
    if (!(key in cache)) {
      try {
        cache[key] = new Intl.NumberFormat(language, {style: "currency", currency, currencyDisplay: "narrowSymbol",
          minimumFractionDigits: 2, maximumFractionDigits: places});
      } catch (error) { // no currency, or one Intl does not know: the amount, then the code
        cache[key] = null;
      }
    }
    return cache[key];
  }

  // money(amount, currency) with up to `places` decimals (never fewer than two)
  function formatMoney(amount, currency, places) {
    const value = Number(amount);
    if (amount === null || amount === undefined || amount === "" || !Number.isFinite(value)) return "";
    const code = String(currency || "").toUpperCase();
    const format = code && moneyFormat(code, places);
    // a currency without a symbol of its own (Intl shows its code) keeps its code after the amount
    if (format && !format.formatToParts(value).some((p) => p.type === "currency" && p.value === code)) {
      return format.format(value);
    }
    const digits = new Intl.NumberFormat(language, {minimumFractionDigits: 2, maximumFractionDigits: places})
      .format(value);
    return `${digits} ${code}`.trim();
  }

  const UNITS = [["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]];

  window.portalFormats = {
    money(amount, currency) { return formatMoney(amount, currency, 2); },
    // a price per hour: up to four places, as scheduling/formats.py rate()
    rate(amount, currency) { return formatMoney(amount, currency, 4); },
    memory(mib) {
      const bytes = Number(mib) * 2 ** 20;
      if (!bytes) return "0Mi";
      for (const [unit, factor] of UNITS) if (bytes % factor === 0) return `${bytes / factor}${unit}`;
      return String(bytes);
    },
  };
})();
