// The task page: show_if, multi paging and "None of the above", box drawing, keyboard, submit once;
// a refused submit is said at the question and beside Submit, with the focus moved there.
// Plain JavaScript, no build step; loaded as a static file (the CSP allows only script-src 'self').
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  if (!form) return;
  const started = Date.now();
  const questions = Array.from(form.querySelectorAll("fieldset.question"));
  const check = document.getElementById("submit-check");
  const preview = form.dataset.preview === "1"; // join/preview_task.html: the same page, nothing sent
  // A touch screen without a mouse: no key hints (the CSS hides the page's own the same way).
  const touchOnly = window.matchMedia("(hover: none) and (pointer: coarse)").matches;
  // One column (a phone): the questions are below the image, which must stay in view at load.
  const oneColumn = window.matchMedia("(max-width: 760px)");
  let current = 0;
  let loading = true; // the first focus of the page scrolls nothing on a phone

  // --- show_if: a question appears only when its parent's answer is one of the listed options ---
  function answerOf(key) {
    const checked = form.querySelector(`input[name="q-${CSS.escape(key)}"]:checked`);
    return checked ? checked.value : null;
  }
  function applyShowIf() {
    for (const fieldset of questions) {
      const raw = fieldset.dataset.showIf;
      if (!raw) continue;
      const rule = JSON.parse(raw);
      const visible = rule.in.includes(answerOf(rule.question));
      fieldset.hidden = !visible;
      fieldset.disabled = !visible; // disabled fields are not submitted
    }
  }

  // --- multi: "None of the above" excludes the rest; long lists are shown page by page ---
  function setupMulti(fieldset) {
    const none = fieldset.querySelector("input[data-none]");
    const boxes = () => Array.from(fieldset.querySelectorAll("input[type=checkbox]:not([data-none])"));
    fieldset.addEventListener("change", (event) => {
      const target = event.target;
      if (target.type !== "checkbox") return;
      if (target === none && none.checked) boxes().forEach((box) => { box.checked = false; });
      if (target !== none && target.checked && none) none.checked = false;
    });
    const pages = Array.from(fieldset.querySelectorAll(".option-page"));
    const shownInput = fieldset.querySelector(".shown-value");
    // Seen before: an edit, or answers sent back by the server (empty for a new task).
    const shown = new Set((shownInput.dataset.seen || "").split(",").filter(Boolean));
    if (none) shown.add(none.value);
    // Pages with an option this annotator has not been shown yet.
    fieldset.unseenPages = () => pages.filter(
      (page) => Array.from(page.querySelectorAll("input")).some((input) => !shown.has(input.value))).length;
    fieldset.pageIndex = 0;
    function show(index) {
      fieldset.pageIndex = Math.max(0, Math.min(pages.length - 1, index));
      pages.forEach((page, i) => { page.hidden = i !== fieldset.pageIndex; });
      pages[fieldset.pageIndex].querySelectorAll("input").forEach((input) => shown.add(input.value));
      // Options already selected (an edit) were shown before.
      boxes().forEach((box) => { if (box.checked) shown.add(box.value); });
      shownInput.value = Array.from(shown).join(",");
      const status = fieldset.querySelector(".page-status");
      if (status) status.textContent = `Options page ${fieldset.pageIndex + 1} of ${pages.length}`;
      const controls = fieldset.querySelector(".pager-controls");
      if (controls) {
        const focused = document.activeElement;
        controls.querySelector('[data-page-step="-1"]').disabled = fieldset.pageIndex === 0;
        controls.querySelector('[data-page-step="1"]').disabled = fieldset.pageIndex === pages.length - 1;
        // Enter pressed "More options" up to the last page: the focus goes to the question, where the
        // next Enter submits (a disabled button would leave it nowhere).
        if (focused && controls.contains(focused) && focused.disabled) {
          fieldset.tabIndex = -1;
          fieldset.focus({ preventScroll: true });
        }
      }
      refreshCheck();
    }
    fieldset.showPage = show;
    const controls = fieldset.querySelector(".pager-controls");
    if (controls) {
      controls.hidden = false;
      controls.addEventListener("click", (event) => {
        const step = event.target.dataset.pageStep;
        if (step) show(fieldset.pageIndex + Number(step));
      });
    }
    if (pages.length) show(0);
  }
  questions.filter((q) => q.dataset.kind === "multi").forEach(setupMulti);

  // --- boxes, zoom and pan live in canvas.js (loaded first); it reports changes as "canvaschange" ---
  const canvas = window.workbenchCanvas || null;
  function clamp(value, low, high) { return Math.max(low, Math.min(high, value)); }

  // --- keyboard ---
  const overlay = document.getElementById("help-overlay");
  const helpButton = document.getElementById("help-button");
  // Closing the list gives focus back to the form (what was focused before, else the current
  // question), never to the help button, where Enter would open the list again.
  let focusedBeforeHelp = null;
  function toggleHelp(open) {
    overlay.hidden = !open;
    if (open) {
      const active = document.activeElement;
      focusedBeforeHelp = active && active !== helpButton && active !== document.body ? active : null;
      document.getElementById("help-close").focus();
    } else if (focusedBeforeHelp && focusedBeforeHelp.isConnected && !focusedBeforeHelp.closest("[hidden]")) {
      focusedBeforeHelp.focus({ preventScroll: true });
      revealAboveBar(focusedBeforeHelp);
    } else {
      focusQuestion(current);
    }
  }
  if (helpButton) helpButton.addEventListener("click", () => toggleHelp(true));
  document.getElementById("help-close").addEventListener("click", () => toggleHelp(false));

  function visibleQuestions() { return questions.filter((q) => !q.hidden); }
  function focusQuestion(index, scroll = true) {
    const visible = visibleQuestions();
    if (!visible.length) return null;
    current = clamp(index, 0, visible.length - 1);
    questions.forEach((q) => q.classList.remove("current"));
    const fieldset = visible[current];
    fieldset.classList.add("current");
    // A boxes question takes the keys itself (Z, Delete); focusing its select would swallow the arrows.
    let target = fieldset;
    if (fieldset.dataset.kind !== "boxes") {
      target = fieldset.querySelector("input:checked") || fieldset.querySelector("input:not([type=hidden])") || fieldset;
    }
    if (target === fieldset) fieldset.tabIndex = -1;
    target.focus({ preventScroll: true });
    if (!scroll) return target;
    fieldset.scrollIntoView({ block: "nearest" });
    revealAboveBar(target);
    return target;
  }
  // The sticky Submit bar must never cover what has focus: the CSS gives the page a
  // scroll-padding-bottom of the bar's height (--submit-bar, measured here); an element focused
  // under the bar anyway (Tab, a digit key) is scrolled up to just above it.
  const bar = form.querySelector(".actions");
  function measureBar() {
    if (bar) document.documentElement.style.setProperty("--submit-bar", `${Math.ceil(bar.offsetHeight)}px`);
  }
  function revealAboveBar(element) {
    if (!bar || !element || bar.contains(element)) return;
    const covered = element.getBoundingClientRect().bottom - bar.getBoundingClientRect().top;
    if (covered > 0) element.scrollIntoView({ block: "nearest" });
    const still = element.getBoundingClientRect().bottom - bar.getBoundingClientRect().top;
    if (still > 0) window.scrollBy(0, still + 4);
  }
  measureBar();
  window.addEventListener("resize", measureBar);
  form.addEventListener("focusin", (event) => {
    // Only for keyboard focus: scrolling under a mouse press would move the click off its target.
    if (!loading && event.target.matches(":focus-visible")) revealAboveBar(event.target);
    const fieldset = event.target.closest("fieldset.question");
    if (!fieldset) return;
    const index = visibleQuestions().indexOf(fieldset);
    if (index >= 0) {
      current = index;
      questions.forEach((q) => q.classList.toggle("current", q === fieldset));
    }
  });
  function pick(fieldset, digit) {
    const kind = fieldset.dataset.kind;
    let input = null;
    if (digit === "0") {
      input = fieldset.querySelector("input[data-apart], input[data-none]") ||
        (kind === "binary" ? fieldset.querySelector('input[value="0"]') : null);
    } else if (kind === "binary") {
      if (digit === "1") input = fieldset.querySelector('input[value="1"]');
    } else {
      const scope = kind === "multi" ? (fieldset.querySelector(".option-page:not([hidden])") || fieldset) :
        fieldset.querySelector(".choices");
      const inputs = scope ? Array.from(scope.querySelectorAll("input")) : [];
      input = inputs[Number(digit) - 1] || null;
    }
    if (!input) return;
    if (input.type === "checkbox") input.checked = !input.checked; else input.checked = true;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    input.focus({ preventScroll: true });
    revealAboveBar(input.closest("label") || input);
  }
  function typing(target) {
    return target.matches('input[type=text], input:not([type]), textarea, select');
  }
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (!overlay.hidden) {
      if (event.key === "Escape" || event.key === "?") { event.preventDefault(); toggleHelp(false); }
      // Focus stays in the dialog (its one control) while it is open.
      if (event.key === "Tab") { event.preventDefault(); document.getElementById("help-close").focus(); }
      return;
    }
    const target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") target.blur();
      return; // Enter in a text field submits its form natively
    }
    const visible = visibleQuestions();
    const fieldset = visible[current];
    if (/^[0-9]$/.test(event.key) && fieldset) {
      event.preventDefault();
      pick(fieldset, event.key);
    } else if (event.key === "ArrowDown") {
      event.preventDefault(); focusQuestion(current + 1);
    } else if (event.key === "ArrowUp") {
      event.preventDefault(); focusQuestion(current - 1);
    } else if ((event.key === "ArrowRight" || event.key === "ArrowLeft") && fieldset && fieldset.showPage) {
      event.preventDefault();
      fieldset.showPage(fieldset.pageIndex + (event.key === "ArrowRight" ? 1 : -1));
    } else if (event.key === "Enter" && !target.matches("button, a, summary")) {
      event.preventDefault(); form.requestSubmit();
    } else if (event.key === "s" || event.key === "S") {
      const skip = document.getElementById("skip-details");
      if (skip) { event.preventDefault(); skip.open = true; document.getElementById("skip-reason").focus(); }
    } else if (event.key === "?") {
      event.preventDefault(); toggleHelp(true);
    }
  });

  // --- before submit: what the protocol requires that the server would refuse anyway ---
  function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }
  // A required question left blank (hidden show_if questions are disabled and not asked; "None of
  // the above" is an answer). The server checks the same again; this only saves the round trip.
  function unanswered(fieldset) {
    if (fieldset.disabled || fieldset.hidden) return null;
    const chosen = fieldset.querySelector('input[name^="q-"]:checked');
    if (fieldset.dataset.required) {
      if (fieldset.dataset.kind === "text") {
        const input = fieldset.querySelector('input[type=text][name^="q-"]');
        if (input && !input.value.trim()) return "needs an answer";
      } else if (!chosen) {
        return "needs an answer";
      }
    }
    if (fieldset.dataset.reasonRequired && chosen) {
      const reason = fieldset.querySelector('input[name^="reason-"]');
      if (reason && !reason.value.trim()) return "needs a reason";
    }
    return null;
  }
  // What stops the submit is said at the question itself (under its title), not only in the list.
  function markQuestion(fieldset, inline) {
    const id = `check-${fieldset.dataset.key}`;
    let message = document.getElementById(id);
    const described = (fieldset.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && x !== id);
    if (inline) {
      if (!message) {
        message = document.createElement("p");
        message.className = "error client-check";
        message.id = id;
        fieldset.querySelector("legend").after(message);
      }
      message.textContent = inline;
      fieldset.setAttribute("aria-invalid", "true");
      described.push(id);
    } else {
      if (message) message.remove();
      if (!fieldset.classList.contains("has-error")) fieldset.removeAttribute("aria-invalid");
    }
    if (described.length) fieldset.setAttribute("aria-describedby", described.join(" "));
    else fieldset.removeAttribute("aria-describedby");
    fieldset.classList.toggle("needs-answer", Boolean(inline));
  }
  // ... and beside Submit, in the sticky bar, where the eye is when Enter was pressed.
  let refusal = null;
  function showRefusal(problems) {
    if (!bar) return;
    if (!refusal) {
      refusal = document.createElement("p");
      refusal.className = "error submit-refusal";
      refusal.id = "submit-refusal";
      const button = bar.querySelector("button[type=submit]");
      if (button) button.after(refusal); else bar.prepend(refusal);
    }
    refusal.hidden = problems.length === 0;
    if (problems.length) {
      const more = problems.length > 1 ? ` (and ${problems.length - 1} more, listed above)` : "";
      refusal.textContent = `Not sent: ${problems[0].text}${more}.`;
    }
    measureBar();
  }
  function submitProblems() {
    const problems = [];
    for (const fieldset of questions) {
      const missing = unanswered(fieldset);
      if (missing) {
        const legend = fieldset.querySelector("legend");
        const qnum = legend.querySelector(".qnum").textContent;
        const prompt = legend.textContent.replace(qnum, "").replace(/\*\s*\(required\)\s*$/, "").trim();
        problems.push({ fieldset, missing, inline: `This question ${missing}.`,
                        text: `Question ${qnum.replace(".", "").trim()}, “${prompt}”, ${missing}` });
      }
    }
    for (const fieldset of questions) {
      if (fieldset.disabled || !fieldset.unseenPages || !fieldset.dataset.requireAllShown) continue;
      const unseen = fieldset.unseenPages();
      if (unseen) {
        const number = fieldset.querySelector(".qnum").textContent.replace(".", "");
        const pages = plural(unseen, "more page", "more pages");
        problems.push({ fieldset, pager: true, text: `${pages} of options to see in question ${number}`,
                        inline: `${pages} of options to see before you submit: press More options${touchOnly ? "" : " (or →)"}.` });
      }
    }
    if (canvas) {
      problems.push(...canvas.problems().map((problem) => (
        { ...problem, inline: `${problem.text.charAt(0).toUpperCase()}${problem.text.slice(1)}.` })));
    }
    return problems;
  }
  function showProblems(problems) {
    const list = check.querySelector("ul");
    list.replaceChildren(...problems.map((problem) => {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = `#${problem.fieldset.id}`;
      link.textContent = problem.text;  // prompts and labels are text, never markup
      link.addEventListener("click", (event) => {
        event.preventDefault();
        focusQuestion(visibleQuestions().indexOf(problem.fieldset));
      });
      item.append(link);
      return item;
    }));
    questions.forEach((fieldset) => {
      const own = problems.filter((problem) => problem.fieldset === fieldset).map((problem) => problem.inline);
      markQuestion(fieldset, own.join(" "));
    });
    check.hidden = problems.length === 0;
    showRefusal(problems);
  }
  // The focus goes to what to do next: the question's answer, or "More options" (Enter then shows the
  // next page), with the question's message in view above the Submit bar.
  function focusProblem(problem) {
    let target = focusQuestion(visibleQuestions().indexOf(problem.fieldset));
    if (problem.pager) {
      const more = problem.fieldset.querySelector('[data-page-step="1"]');
      if (more && !more.disabled) { more.focus({ preventScroll: true }); target = more; }
    }
    if (problem.activate && canvas && canvas.setActive) canvas.setActive(problem.activate);
    const message = document.getElementById(`check-${problem.fieldset.dataset.key}`);
    if (message) {
      const top = message.getBoundingClientRect().top;
      if (top < 8 || top > window.innerHeight) window.scrollBy(0, top - 8);
    }
    revealAboveBar(target);
  }
  // Once shown, the list follows the answers and goes away when nothing is left.
  function refreshCheck() { if (check && !check.hidden) showProblems(submitProblems()); }

  // --- submit once; record the time on the task ---
  let sent = false;
  form.addEventListener("submit", (event) => {
    if (sent) { event.preventDefault(); return; }
    const problems = check ? submitProblems() : [];
    if (problems.length) {
      event.preventDefault();
      showProblems(problems);
      focusProblem(problems[0]);
      return;
    }
    if (preview) { event.preventDefault(); return; } // the researcher's preview: checked, never sent
    sent = true;
    document.getElementById("time-spent").value = String(Date.now() - started);
    const button = document.getElementById("submit-button");
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
  });
  // Coming back through the browser's history must not leave the button disabled.
  window.addEventListener("pageshow", () => { sent = false; document.getElementById("submit-button").disabled = preview; });

  form.addEventListener("change", applyShowIf);
  form.addEventListener("change", refreshCheck);
  form.addEventListener("canvaschange", refreshCheck);
  applyShowIf();
  if (canvas) canvas.refresh();
  const nextImage = document.getElementById("task").dataset.nextImage;
  if (nextImage) { const preload = new Image(); preload.src = nextImage; }
  const firstError = form.querySelector("fieldset.has-error");
  if (firstError) focusQuestion(visibleQuestions().indexOf(firstError));
  else focusQuestion(0, !oneColumn.matches); // a phone keeps the image in view: its questions are below
  loading = false;
})();
