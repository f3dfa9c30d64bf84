// The adjudication page's keys (docs/agreement.md, "Adjudication"): 1-9 choose an option of the
// current question (0 Unsure / None of the above / no), the up and down arrows move between questions,
// Enter saves every decision of the item and opens the next one. The image (zoom, pan, + - F, Space)
// is canvas.js's, loaded first: the page gives it the task page's markup (#task, #task-form, figures)
// and draws everyone's boxes as an SVG inside each canvas stage, so they follow its zoom unaided.
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  if (!form || !form.classList.contains("adjudicate-form")) return;
  const questions = Array.from(form.querySelectorAll("fieldset.question"));
  let current = 0;
  let sent = false;

  function typing(target) {
    return target.matches('input[type=text], input:not([type]), textarea, select');
  }
  function mark(index) {
    current = index;
    questions.forEach((q, i) => q.classList.toggle("current", i === index));
  }
  function focusQuestion(index) {
    if (!questions.length) return;
    mark(Math.max(0, Math.min(questions.length - 1, index)));
    const fieldset = questions[current];
    // A text decision is not focused by the keys: a digit or Enter meant for the page would be typed
    // into it. Its field takes focus when clicked or reached with Tab.
    const target = fieldset.dataset.kind === "text" ? fieldset :
      fieldset.querySelector("input:checked") ||
      fieldset.querySelector("input:not([type=hidden])") || fieldset;
    if (target === fieldset) fieldset.tabIndex = -1;
    target.focus({ preventScroll: true });
    fieldset.scrollIntoView({ block: "nearest" });
  }
  function pick(fieldset, digit) {
    const input = fieldset.querySelector(`input[data-digit="${digit}"]`);
    if (!input) return;
    if (input.type === "checkbox") input.checked = !input.checked; else input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    input.focus({ preventScroll: true });
  }
  form.addEventListener("focusin", (event) => {
    const index = questions.indexOf(event.target.closest("fieldset.question"));
    if (index >= 0) mark(index);
  });
  form.addEventListener("submit", (event) => {
    if (sent) event.preventDefault(); // Enter held down: one save
    sent = true;
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    const target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") target.blur();
      return; // Enter in a text field submits the form natively
    }
    const key = event.key;
    // On the focused image the arrows move a zoomed view (canvas.js); digits and Enter still work.
    if (key.startsWith("Arrow") && target.closest && target.closest(".canvas-viewport")) return;
    if (/^[0-9]$/.test(key) && questions[current]) {
      event.preventDefault(); pick(questions[current], key);
    } else if (key === "ArrowDown") {
      event.preventDefault(); focusQuestion(current + 1);
    } else if (key === "ArrowUp") {
      event.preventDefault(); focusQuestion(current - 1);
    } else if (key === "Enter" && !target.matches("button, a, summary")) {
      event.preventDefault(); form.requestSubmit();
    }
  });
  // Start on a refused question, else the first flagged one with nothing chosen, else the first.
  let start = questions.findIndex((q) => q.classList.contains("has-error"));
  if (start < 0) {
    start = questions.findIndex((q) => q.dataset.flagged && q.dataset.kind !== "text" &&
      !q.querySelector("input:checked"));
  }
  focusQuestion(start >= 0 ? start : 0);
})();
