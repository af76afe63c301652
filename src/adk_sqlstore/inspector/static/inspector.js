// adk-sqlstore memory inspector: progressive enhancement only (every page works without it).
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  for (const field of document.querySelectorAll("[data-autosubmit]")) {
    field.addEventListener("change", () => field.form && field.form.requestSubmit());
  }
});
