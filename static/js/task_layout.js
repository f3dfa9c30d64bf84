// The task page's layout around the canvas: the instructions' fold, remembered per annotator and study.
// The server opens the instructions on an annotator's first item and folds them after; once they open
// or fold them by hand, that choice is kept in localStorage for the study and applied here, the one
// place that reads it (docs/annotating.md, "For annotators"). Only a person's click (or Enter / Space)
// on the summary is recorded: a "toggle" event also comes from the server-rendered open attribute and
// from this script's own change, and recording those kept the instructions open on every item.
// Plain JavaScript, no build step (the CSP allows only script-src 'self').
(function () {
  "use strict";
  const details = document.getElementById("instructions");
  if (!details || !details.dataset.remember) return;
  const key = `workbench-instructions:${details.dataset.remember}`;
  const store = (() => { try { return window.localStorage; } catch (error) { return null; } })();
  if (!store) return;
  const kept = store.getItem(key);
  if (kept === "opened" || kept === "folded") details.open = kept === "opened";
  else if (kept !== null) store.removeItem(key); // "open", written by the old race, is no one's choice
  const summary = details.querySelector("summary");
  if (!summary) return;
  summary.addEventListener("click", () => {
    // The click toggles the fold after this listener: record the state it is about to take.
    try { store.setItem(key, details.open ? "folded" : "opened"); } catch (error) { /* full */ }
  });
})();
