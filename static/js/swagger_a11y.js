// The API docs page (Swagger UI, drawn by script) made to pass axe-core: the operation groups are
// headings one level below the page's title, and the headings inside them one below those (heading-order), and the API's description sits in a named
// region beside Swagger UI's own main landmark (region). A file, not inline: the CSP allows 'self' only.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root) return;
  function mend() {
    root.querySelectorAll("h3.opblock-tag:not([aria-level])").forEach(function (h) {
      h.setAttribute("role", "heading");
      h.setAttribute("aria-level", "2");
    });
    root.querySelectorAll("h4:not([aria-level])").forEach(function (h) {
      h.setAttribute("role", "heading");
      h.setAttribute("aria-level", "3");
    });
    root.querySelectorAll(".information-container:not([role])").forEach(function (box) {
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", "About this API");
    });
  }
  new MutationObserver(mend).observe(root, { childList: true, subtree: true });
  mend();
})();
