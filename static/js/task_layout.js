// The task page's layout around the canvas: the instructions' fold, remembered per annotator and study.
// The server opens the instructions on an annotator's first item and folds them after; once they open
// or fold them by hand, that choice is kept in localStorage for the study (docs/annotating.md,
// "The task page"). Plain JavaScript, no build step (the CSP allows only script-src 'self').
(function () {
  "use strict";
  const details = document.getElementById("instructions");
  if (!details || !details.dataset.remember) return;
  const key = `workbench-instructions:${details.dataset.remember}`;
  const store = (() => { try { return window.localStorage; } catch (error) { return null; } })();
  if (!store) return;
  const kept = store.getItem(key);
  if (kept === "open" || kept === "folded") details.open = kept === "open";
  details.addEventListener("toggle", () => {
    try { store.setItem(key, details.open ? "open" : "folded"); } catch (error) { /* full */ }
  });
})();
