// The adjustments form: show the job number or the billing month, whichever "Applies to" names.
(function () {
  const form = document.getElementById("adjustment-form");
  if (!form) return;
  const rows = { job: document.getElementById("row-job"), period: document.getElementById("row-period") };
  function update() {
    const chosen = form.querySelector('input[name="applies_to"]:checked');
    for (const [name, row] of Object.entries(rows)) {
      if (row) row.hidden = chosen !== null && chosen.value !== name;
    }
  }
  form.addEventListener("change", function (event) {
    if (event.target.name === "applies_to") update();
  });
  update();
})();
