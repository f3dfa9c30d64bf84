// The task page: show_if, multi paging and "None of the above", box drawing, keyboard, submit once.
// Plain JavaScript, no build step; loaded as a static file (the CSP allows only script-src 'self').
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  if (!form) return;
  const started = Date.now();
  const questions = Array.from(form.querySelectorAll("fieldset.question"));
  const check = document.getElementById("submit-check");
  let current = 0;

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
      refreshBoxOptions();
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
        controls.querySelector('[data-page-step="-1"]').disabled = fieldset.pageIndex === 0;
        controls.querySelector('[data-page-step="1"]').disabled = fieldset.pageIndex === pages.length - 1;
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

  // --- boxes: drawn in display pixels, stored in original image pixels ---
  const boxesField = questions.find((q) => q.dataset.kind === "boxes");
  const canvases = Array.from(document.querySelectorAll(".box-canvas"));
  let boxes = [];
  let selectedBox = -1;
  const multiImage = document.getElementById("task").dataset.multiImage === "1";
  const boxValue = boxesField ? boxesField.querySelector(".boxes-value") : null;
  const optionSelect = boxesField ? boxesField.querySelector(".box-option") : null;
  const labels = {};
  if (boxesField) {
    const template = boxesField.querySelector("template.box-labels");
    if (template) template.content.querySelectorAll("span").forEach((span) => { labels[span.dataset.key] = span.textContent; });
    try { boxes = JSON.parse(boxValue.value || "[]"); } catch (error) { boxes = []; }
    if (!Array.isArray(boxes)) boxes = [];
  }
  function scaleOf(canvas) {
    const img = canvas.querySelector("img");
    const width = Number(canvas.dataset.width) || img.naturalWidth || img.clientWidth;
    const height = Number(canvas.dataset.height) || img.naturalHeight || img.clientHeight;
    return { sx: width / img.clientWidth, sy: height / img.clientHeight, width, height };
  }
  function canvasFor(box) {
    return canvases.find((canvas) => Number(canvas.dataset.image) === (box.image || 0)) || canvases[0];
  }
  const boxesPanel = boxesField ? boxesField.querySelector(".boxes-panel") : null;
  function linkedSelection() {
    if (!boxesPanel) return [];
    const linked = boxesPanel.dataset.linked;
    return Array.from(form.querySelectorAll(`input[name="q-${CSS.escape(linked)}"]:checked`))
      .map((input) => input.value).filter((key) => key in labels);
  }
  function refreshBoxOptions() {
    if (!optionSelect) return;
    const selected = linkedSelection();
    const previous = optionSelect.value;
    optionSelect.innerHTML = "";
    if (!selected.length) {
      optionSelect.add(new Option("— select an option above first —", ""));
    }
    selected.forEach((key) => optionSelect.add(new Option(labels[key], key)));
    if (selected.includes(previous)) optionSelect.value = previous;
    renderBoxes();
  }
  function save() { if (boxValue) boxValue.value = JSON.stringify(boxes); }
  function renderBoxes() {
    if (!boxesField) return;
    canvases.forEach((canvas) => canvas.querySelectorAll(".box").forEach((el) => el.remove()));
    const list = boxesField.querySelector(".box-list");
    list.innerHTML = "";
    const selected = linkedSelection();
    boxes.forEach((box, index) => {
      const canvas = canvasFor(box);
      const { sx, sy } = scaleOf(canvas);
      const el = document.createElement("div");
      el.className = "box" + (index === selectedBox ? " selected" : "") + (selected.includes(box.option) ? "" : " orphan");
      el.style.left = `${box.x / sx}px`;
      el.style.top = `${box.y / sy}px`;
      el.style.width = `${box.w / sx}px`;
      el.style.height = `${box.h / sy}px`;
      el.dataset.index = index;
      el.title = labels[box.option] || box.option;
      const tag = document.createElement("span");
      tag.className = "box-tag";
      tag.textContent = `${index + 1} ${labels[box.option] || box.option}`;
      const handle = document.createElement("span");
      handle.className = "box-handle";
      el.append(tag, handle);
      canvas.append(el);
      const item = document.createElement("li");
      item.append(`Box ${index + 1} at x ${box.x}, y ${box.y}, ${box.w}×${box.h} px` +
        (multiImage ? ` on image ${(box.image || 0) + 1}` : "") + " supports ");
      // Relink a box to another selected option.
      const relink = document.createElement("select");
      relink.setAttribute("aria-label", `Option of box ${index + 1}`);
      const choices = selected.includes(box.option) ? selected : [box.option, ...selected];
      choices.forEach((key) => relink.add(new Option(labels[key] || key, key, false, key === box.option)));
      relink.addEventListener("change", () => { box.option = relink.value; renderBoxes(); });
      item.append(relink, " ");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "link";
      remove.textContent = `Delete box ${index + 1}`;
      remove.addEventListener("click", () => { boxes.splice(index, 1); selectedBox = -1; save(); renderBoxes(); });
      item.append(remove);
      list.append(item);
    });
    save();
    refreshCheck();
  }
  function clamp(value, low, high) { return Math.max(low, Math.min(high, value)); }
  canvases.forEach((canvas) => {
    if (!boxesField) return;
    canvas.classList.add("drawable");
    let drag = null;
    canvas.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      const rect = canvas.querySelector("img").getBoundingClientRect();
      const { sx, sy, width, height } = scaleOf(canvas);
      const px = clamp((event.clientX - rect.left) * sx, 0, width);
      const py = clamp((event.clientY - rect.top) * sy, 0, height);
      const boxEl = event.target.closest(".box");
      if (boxEl) {
        selectedBox = Number(boxEl.dataset.index);
        const box = boxes[selectedBox];
        drag = { mode: event.target.classList.contains("box-handle") ? "resize" : "move", box, px, py,
                 start: { ...box }, sx, sy, width, height, rect };
      } else {
        const option = optionSelect.value;
        if (!option) {
          optionSelect.focus();
          optionSelect.classList.add("attention");
          return;
        }
        const box = { option, x: Math.round(px), y: Math.round(py), w: 1, h: 1 };
        if (multiImage) box.image = Number(canvas.dataset.image);
        boxes.push(box);
        selectedBox = boxes.length - 1;
        drag = { mode: "draw", box, px, py, sx, sy, width, height, rect };
      }
      canvas.setPointerCapture(event.pointerId);
      event.preventDefault();
      renderBoxes();
    });
    canvas.addEventListener("pointermove", (event) => {
      if (!drag) return;
      const x = clamp((event.clientX - drag.rect.left) * drag.sx, 0, drag.width);
      const y = clamp((event.clientY - drag.rect.top) * drag.sy, 0, drag.height);
      const box = drag.box;
      if (drag.mode === "draw") {
        box.x = Math.round(Math.min(drag.px, x));
        box.y = Math.round(Math.min(drag.py, y));
        box.w = Math.max(1, Math.round(Math.abs(x - drag.px)));
        box.h = Math.max(1, Math.round(Math.abs(y - drag.py)));
      } else if (drag.mode === "move") {
        box.x = Math.round(clamp(drag.start.x + x - drag.px, 0, drag.width - box.w));
        box.y = Math.round(clamp(drag.start.y + y - drag.py, 0, drag.height - box.h));
      } else {
        box.w = Math.max(1, Math.round(clamp(drag.start.w + x - drag.px, 1, drag.width - box.x)));
        box.h = Math.max(1, Math.round(clamp(drag.start.h + y - drag.py, 1, drag.height - box.y)));
      }
      renderBoxes();
    });
    const finish = () => {
      if (!drag) return;
      // A click without a drag makes no box.
      if (drag.mode === "draw" && (drag.box.w < 3 || drag.box.h < 3)) {
        boxes.splice(boxes.indexOf(drag.box), 1);
        selectedBox = -1;
      }
      drag = null;
      renderBoxes();
    };
    canvas.addEventListener("pointerup", finish);
    canvas.addEventListener("pointercancel", finish);
  });
  if (boxesField) {
    optionSelect.addEventListener("change", () => {
      optionSelect.classList.remove("attention");
    });
    window.addEventListener("resize", renderBoxes);
    canvases.forEach((canvas) => {
      const img = canvas.querySelector("img");
      if (!img.complete) img.addEventListener("load", renderBoxes);
    });
  }

  // --- keyboard ---
  const overlay = document.getElementById("help-overlay");
  const helpButton = document.getElementById("help-button");
  function toggleHelp(open) {
    overlay.hidden = !open;
    if (open) document.getElementById("help-close").focus(); else if (helpButton) helpButton.focus();
  }
  if (helpButton) helpButton.addEventListener("click", () => toggleHelp(true));
  document.getElementById("help-close").addEventListener("click", () => toggleHelp(false));

  function visibleQuestions() { return questions.filter((q) => !q.hidden); }
  function focusQuestion(index) {
    const visible = visibleQuestions();
    if (!visible.length) return;
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
    fieldset.scrollIntoView({ block: "nearest" });
  }
  form.addEventListener("focusin", (event) => {
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
  }
  function typing(target) {
    return target.matches('input[type=text], input:not([type]), textarea, select');
  }
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (!overlay.hidden) {
      if (event.key === "Escape" || event.key === "?") { event.preventDefault(); toggleHelp(false); }
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
    } else if ((event.key === "z" || event.key === "Z") && boxes.length) {
      event.preventDefault(); boxes.pop(); selectedBox = -1; renderBoxes();
    } else if ((event.key === "Delete" || event.key === "Backspace") && selectedBox >= 0) {
      event.preventDefault(); boxes.splice(selectedBox, 1); selectedBox = -1; renderBoxes();
    } else if (event.key === "?") {
      event.preventDefault(); toggleHelp(true);
    }
  });

  // --- before submit: what the protocol requires that the server would refuse anyway ---
  function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }
  function submitProblems() {
    const problems = [];
    for (const fieldset of questions) {
      if (fieldset.disabled || !fieldset.unseenPages || !fieldset.dataset.requireAllShown) continue;
      const unseen = fieldset.unseenPages();
      if (unseen) {
        const number = fieldset.querySelector(".qnum").textContent.replace(".", "");
        problems.push({ fieldset, text: `${plural(unseen, "more page", "more pages")} of options to see in question ${number}` });
      }
    }
    if (boxesPanel && !boxesField.disabled && boxesPanel.dataset.boxesRequired === "each_selected") {
      const boxed = new Set(boxes.map((box) => box.option));
      const missing = linkedSelection().filter((key) => !boxed.has(key));
      if (missing.length) {
        const { nounOne, nounMany } = boxesPanel.dataset;
        const what = missing.length === 1 ? `1 selected ${nounOne} has` : `${missing.length} selected ${nounMany} have`;
        problems.push({ fieldset: boxesField, text: `${what} no box: ${missing.map((key) => labels[key] || key).join(", ")}` });
      }
    }
    return problems;
  }
  function showProblems(problems) {
    const list = check.querySelector("ul");
    list.replaceChildren(...problems.map((problem) => {
      const item = document.createElement("li");
      item.textContent = problem.text;  // labels are text, never markup
      return item;
    }));
    check.hidden = problems.length === 0;
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
      focusQuestion(visibleQuestions().indexOf(problems[0].fieldset));
      return;
    }
    sent = true;
    document.getElementById("time-spent").value = String(Date.now() - started);
    const button = document.getElementById("submit-button");
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
  });
  // Coming back through the browser's history must not leave the button disabled.
  window.addEventListener("pageshow", () => { sent = false; document.getElementById("submit-button").disabled = false; });

  form.addEventListener("change", applyShowIf);
  form.addEventListener("change", refreshCheck);
  applyShowIf();
  refreshBoxOptions();
  const nextImage = document.getElementById("task").dataset.nextImage;
  if (nextImage) { const preload = new Image(); preload.src = nextImage; }
  const firstError = form.querySelector("fieldset.has-error");
  if (firstError) focusQuestion(visibleQuestions().indexOf(firstError));
  else focusQuestion(0);
})();
