// Selects marked data-autosubmit submit their form on change (no inline handlers: the CSP forbids them).
(function () {
  "use strict";
  document.addEventListener("change", (event) => {
    if (event.target.matches("select[data-autosubmit]")) event.target.form.submit();
  });
})();
