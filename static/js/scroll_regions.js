// A table wider than its card scrolls sideways inside a .table-scroll box (a long one, .table-tall,
// also down, under its header row: static/css/long_pages.css). A keyboard user must be
// able to reach such a box to scroll it (axe: scrollable-region-focusable), so every .table-scroll
// that overflows becomes a focusable, named region (named after its table's caption); one that fits
// is left alone (no needless tab stop). Checked again when the window is resized.
(function () {
  "use strict";
  function mark() {
    document.querySelectorAll(".table-scroll").forEach(function (box) {
      var overflows = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (overflows && !box.hasAttribute("tabindex")) {
        var caption = box.querySelector("caption");
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        var way = box.scrollHeight > box.clientHeight + 1 ? " (scrolls)" : " (scrolls sideways)";
        box.setAttribute("aria-label", (caption ? caption.textContent.trim() : "Table") + way);
        box.dataset.scrollRegion = "auto";
      } else if (!overflows && box.dataset.scrollRegion === "auto") {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
        delete box.dataset.scrollRegion;
      }
    });
  }
  document.addEventListener("DOMContentLoaded", mark);
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true); // a folded table opened (toggle does not bubble)
})();
