// The task page's image canvas: fit to the panel, zoom and pan, and boxes drawn in ORIGINAL-image pixels.
// Loaded before annotate.js (both deferred). It talks to annotate.js through window.workbenchCanvas
// (submit problems, the active label) and a "canvaschange" event on the form; it handles its own keys
// (+ - F, Z and Ctrl+Z undo, Ctrl+Shift+Z / Ctrl+Y redo, Delete, Space to pan over the image, and on a
// focused image: arrows, Ctrl + arrows, 1-9 for the label of new boxes), the legend's label chips,
// touch (one finger draws, two fingers pinch-zoom and pan; never the browser's own gestures), and the
// region list (hide / lock per box). Plain JavaScript, no build step (CSP: script-src 'self').
// docs/annotating.md, "The image canvas", describes what a user can do.
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  const task = document.getElementById("task");
  if (!form || !task) return;
  // Okabe and Ito's colour-blind-safe palette, given by the option's place in the protocol's list
  // (so an option keeps its colour on every item); past 8 options the colours repeat with dashes.
  const PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"];
  const ZOOM_STEP = Math.SQRT2;
  const MAX_ZOOM = 8;
  const canvases = Array.from(task.querySelectorAll(".box-canvas"));
  const tools = document.getElementById("canvas-tools");
  const legend = document.getElementById("box-legend");
  const zoomLevel = document.getElementById("zoom-level");
  const panToggle = document.getElementById("pan-toggle");
  const overlay = document.getElementById("help-overlay");
  const narrow = window.matchMedia("(max-width: 760px)");
  // A touch screen without a mouse (a phone, a tablet): no key hints (the CSS hides them the same way).
  const touchOnly = window.matchMedia("(hover: none) and (pointer: coarse)").matches;
  const BIG_STEP = 50; // screen pixels a Ctrl + arrow moves or resizes the selected box (plain arrows: 10)
  const multiImage = task.dataset.multiImage === "1";
  let zoom = 1; // a multiple of the fit, the same for every image of the item
  let panMode = false;
  let spaceHeld = false;
  let hovered = null;
  const touches = new Map(); // touch pointers down on an image: id -> where
  let pinch = null;

  // --- the boxes question: its options, their colours, the stored value ---
  const boxesField = form.querySelector('fieldset.question[data-kind="boxes"]');
  const boxesPanel = boxesField ? boxesField.querySelector(".boxes-panel") : null;
  const boxValue = boxesField ? boxesField.querySelector(".boxes-value") : null;
  const optionSelect = boxesField ? boxesField.querySelector(".box-option") : null;
  const labels = {};
  const order = {};
  let boxes = [];
  let selectedBox = -1;
  // Hide and lock are view state of this page, not part of the answer: kept per box by a stable id
  // that JSON (the stored value) never sees.
  let nextUid = 1;
  const hiddenBoxes = new Set();
  const lockedBoxes = new Set();
  function uidOf(box) {
    if (!box.__uid) Object.defineProperty(box, "__uid", { value: nextUid++, enumerable: false });
    return box.__uid;
  }
  function isHidden(box) { return hiddenBoxes.has(uidOf(box)); }
  function isLocked(box) { return lockedBoxes.has(uidOf(box)); }
  // Undo and redo: every change to the boxes (add, move, resize, delete, option) first records the
  // boxes as they were; undo puts them back, redo takes the change again.
  const MAX_HISTORY = 200;
  const history = [];
  const future = [];
  function copyBoxes(list) {
    return list.map((box) => {
      const copy = { ...box };
      Object.defineProperty(copy, "__uid", { value: uidOf(box), enumerable: false });
      return copy;
    });
  }
  function record() {
    history.push(copyBoxes(boxes));
    if (history.length > MAX_HISTORY) history.shift();
    future.length = 0;
    refreshHistoryButtons();
  }
  function undo() {
    if (!history.length) return false;
    future.push(copyBoxes(boxes));
    boxes = history.pop();
    selectedBox = -1;
    renderBoxes();
    refreshHistoryButtons();
    return true;
  }
  function redo() {
    if (!future.length) return false;
    history.push(copyBoxes(boxes));
    boxes = future.pop();
    selectedBox = -1;
    renderBoxes();
    refreshHistoryButtons();
    return true;
  }
  let undoButton = null;
  let redoButton = null;
  function refreshHistoryButtons() {
    if (undoButton) undoButton.disabled = !history.length;
    if (redoButton) redoButton.disabled = !future.length;
  }
  if (boxesPanel) {
    const template = boxesField.querySelector("template.box-labels");
    if (template) {
      template.content.querySelectorAll("span").forEach((span, index) => {
        labels[span.dataset.key] = span.textContent;
        order[span.dataset.key] = index;
      });
    }
    try { boxes = JSON.parse(boxValue.value || "[]"); } catch (error) { boxes = []; }
    if (!Array.isArray(boxes)) boxes = [];
  }
  // The label of new boxes ("New boxes support"): the option ticked last in the linked question, until
  // a legend chip, a number key on the focused image or the select chooses another.
  const ticked = []; // the linked question's ticked options, oldest first
  // Another label lets go of the selected box: a drag inside it then draws (the box just drawn stays
  // selected otherwise, and the next option's first drag would move it).
  function setActive(key) {
    if (!optionSelect || !Array.from(optionSelect.options).some((option) => option.value === key)) return;
    if (optionSelect.value !== key) selectedBox = -1;
    optionSelect.value = key;
    optionSelect.classList.remove("attention");
    renderBoxes();
  }
  function colourOf(key) { return PALETTE[(order[key] ?? 0) % PALETTE.length]; }
  function dashedOf(key) { return (order[key] ?? 0) >= PALETTE.length; }
  function labelOf(key) { return labels[key] || key; }
  function changed() { form.dispatchEvent(new CustomEvent("canvaschange")); }

  // --- fit, zoom and pan ---
  function clamp(value, low, high) { return Math.max(low, Math.min(high, value)); }
  function partsOf(canvas) {
    return {
      viewport: canvas.querySelector(".canvas-viewport"),
      stage: canvas.querySelector(".canvas-stage"),
      img: canvas.querySelector("img"),
    };
  }
  // The original image's size: stored with the item; else the shown file's own.
  function naturalOf(canvas) {
    const img = canvas.querySelector("img");
    return {
      width: Number(canvas.dataset.width) || img.naturalWidth || 0,
      height: Number(canvas.dataset.height) || img.naturalHeight || 0,
    };
  }
  // The fit's height: all of the image shows in the window with the page scrolled to the top, from
  // the images' top to the window's bottom (rows of an image set share it); measured from the task
  // grid, which never sticks, so a scrolled page measures the same. Never under half the window.
  // On a phone (one column, the questions below the image): at most 60% of the window, and never past
  // the window's bottom at load (the questions start below it); never under a third of the window (a
  // set of more than two images: 60% of the window a row, as before).
  function fitHeight() {
    const images = task.querySelector(".images");
    const view = task.querySelector(".item-view");
    if (!images || !view) return window.innerHeight * (narrow.matches ? 0.6 : 0.78);
    const top = task.getBoundingClientRect().top + window.scrollY +
      (images.getBoundingClientRect().top - view.getBoundingClientRect().top);
    const rows = multiImage ? Math.ceil(canvases.length / 2) : 1;
    const below = 20 + (multiImage ? 26 * rows : 0); // the panel's padding and border; captions and gaps
    const room = window.innerHeight - top - below;
    if (narrow.matches && rows > 1) return window.innerHeight * 0.6;
    if (narrow.matches) return Math.max(window.innerHeight / 3, Math.min(window.innerHeight * 0.6, room));
    return Math.max(window.innerHeight * 0.5, room) / rows;
  }
  // Sizes the image at fit x zoom; `anchor` (viewport pixels) stays over the same image point.
  function layout(canvas, anchor) {
    const { viewport, stage, img } = partsOf(canvas);
    const { width, height } = naturalOf(canvas);
    if (!viewport || !width || !height) return;
    const maxHeight = fitHeight();
    const fit = Math.min(canvas.clientWidth / width, maxHeight / height);
    const before = canvas.scale || fit * zoom;
    const scale = fit * zoom;
    const ax = anchor ? anchor.x : viewport.clientWidth / 2;
    const ay = anchor ? anchor.y : viewport.clientHeight / 2;
    const px = (viewport.scrollLeft + ax) / before;
    const py = (viewport.scrollTop + ay) / before;
    canvas.scale = scale;
    for (const el of [stage, img]) {
      el.style.width = `${width * scale}px`;
      el.style.height = `${height * scale}px`;
    }
    viewport.style.height = `${Math.ceil(height * fit)}px`;
    viewport.scrollLeft = px * scale - ax;
    viewport.scrollTop = py * scale - ay;
    canvas.classList.toggle("zoomed", zoom > 1);
  }
  function setZoom(value, canvas, anchor) {
    zoom = clamp(value, 1, MAX_ZOOM);
    canvases.forEach((each) => layout(each, each === canvas ? anchor : null));
    if (zoomLevel) zoomLevel.textContent = zoom <= 1 ? "Fit" : `×${zoom.toFixed(1)}`;
    if (tools) {
      tools.querySelector('[data-zoom="out"]').disabled = zoom <= 1;
      tools.querySelector('[data-zoom="fit"]').disabled = zoom <= 1;
      tools.querySelector('[data-zoom="in"]').disabled = zoom >= MAX_ZOOM;
    }
    renderBoxes();
  }
  function fitAll() {
    canvases.forEach((canvas) => { canvas.scale = 0; });
    setZoom(zoom);
  }
  function setPanMode(on) {
    panMode = on;
    if (panToggle) panToggle.setAttribute("aria-pressed", on ? "true" : "false");
    canvases.forEach((canvas) => canvas.classList.toggle("panning", panMode || spaceHeld));
  }

  // --- boxes: drawn on the shown image, kept in original pixels ---
  function canvasFor(box) {
    return canvases.find((canvas) => Number(canvas.dataset.image) === (box.image || 0)) || canvases[0];
  }
  function linkedSelection() {
    if (!boxesPanel) return [];
    const linked = boxesPanel.dataset.linked;
    return Array.from(form.querySelectorAll(`input[name="q-${CSS.escape(linked)}"]:checked`))
      .map((input) => input.value).filter((key) => key in labels);
  }
  function swatch(key) {
    const mark = document.createElement("span");
    mark.className = "swatch" + (dashedOf(key) ? " dashed" : "");
    mark.style.setProperty("--box-colour", colourOf(key));
    mark.setAttribute("aria-hidden", "true");
    return mark;
  }
  // The legend above the image: a chip per ticked option (press one, or its number on the focused
  // image, to draw that option's boxes; the active one is pressed), then any option a box still has.
  // The chips are out of the Tab order: the number keys and the "New boxes support" select reach them.
  function renderLegend(selected) {
    if (!legend) return;
    const keys = [...selected];
    boxes.forEach((box) => { if (!keys.includes(box.option)) keys.push(box.option); });
    const active = optionSelect ? optionSelect.value : "";
    legend.replaceChildren(...keys.map((key) => {
      const item = document.createElement("li");
      const digit = selected.indexOf(key) + 1;
      if (!digit) {
        item.append(swatch(key), labelOf(key)); // labels are text, never markup
        return item;
      }
      const chip = document.createElement("button");
      chip.type = "button";
      chip.className = "legend-chip";
      chip.tabIndex = -1;
      chip.dataset.option = key;
      if (digit <= 9) chip.dataset.digit = String(digit);
      chip.setAttribute("aria-pressed", key === active ? "true" : "false");
      chip.title = touchOnly || digit > 9 ? `New boxes support ${labelOf(key)}` :
        `New boxes support ${labelOf(key)} (key ${digit} on the image)`;
      chip.append(swatch(key), labelOf(key));
      item.append(chip);
      return item;
    }));
    legend.hidden = keys.length === 0;
  }
  if (legend) {
    legend.addEventListener("click", (event) => {
      const chip = event.target.closest(".legend-chip");
      if (!chip) return;
      setActive(chip.dataset.option);
      // The image takes the focus: its number keys choose again, Enter submits, the arrows move a box.
      const viewport = task.querySelector(".canvas-viewport");
      if (viewport) viewport.focus({ preventScroll: true });
    });
  }
  function refreshBoxOptions(event) {
    if (!optionSelect) return;
    const selected = linkedSelection();
    for (let i = ticked.length - 1; i >= 0; i--) if (!selected.includes(ticked[i])) ticked.splice(i, 1);
    selected.forEach((key) => { if (!ticked.includes(key)) ticked.push(key); });
    const target = event && event.target;
    const tickedNow = target && target.type === "checkbox" && target.checked && selected.includes(target.value) &&
      boxesPanel && target.name === `q-${boxesPanel.dataset.linked}`;
    if (tickedNow) ticked.push(...ticked.splice(ticked.indexOf(target.value), 1)); // the newest last
    const previous = optionSelect.value;
    optionSelect.innerHTML = "";
    if (!selected.length) optionSelect.add(new Option("— select an option above first —", ""));
    selected.forEach((key) => optionSelect.add(new Option(labels[key], key)));
    if (tickedNow) optionSelect.value = target.value; // the option just ticked is the one to draw next
    else if (selected.includes(previous)) optionSelect.value = previous;
    else if (ticked.length) optionSelect.value = ticked[ticked.length - 1];
    if (optionSelect.value) optionSelect.classList.remove("attention");
    if (optionSelect.value !== previous) selectedBox = -1;
    renderBoxes();
  }
  function save() { if (boxValue) boxValue.value = JSON.stringify(boxes); }
  function renderBoxes() {
    if (!boxesPanel) return;
    canvases.forEach((canvas) => canvas.querySelectorAll(".box").forEach((el) => el.remove()));
    const list = boxesField.querySelector(".box-list");
    list.innerHTML = "";
    const selected = linkedSelection();
    if (selectedBox >= 0 && boxes[selectedBox] && isHidden(boxes[selectedBox])) selectedBox = -1;
    boxes.forEach((box, index) => {
      const canvas = canvasFor(box);
      const scale = canvas.scale || 1;
      const hidden = isHidden(box);
      const locked = isLocked(box);
      const el = document.createElement("div");
      el.className = "box" + (index === selectedBox ? " selected" : "") + (locked ? " locked" : "") +
        (selected.includes(box.option) ? "" : " orphan") + (dashedOf(box.option) ? " dashed" : "");
      // A locked box takes no pointer: a drag on it draws a new box instead of moving it.
      if (locked) el.style.pointerEvents = "none";
      if (hidden) el.hidden = true;
      el.style.setProperty("--box-colour", colourOf(box.option));
      el.style.left = `${box.x * scale}px`;
      el.style.top = `${box.y * scale}px`;
      el.style.width = `${box.w * scale}px`;
      el.style.height = `${box.h * scale}px`;
      el.dataset.index = index;
      el.title = labelOf(box.option);
      // The tag has a fixed size on screen; it goes inside the box where it would leave the image.
      const tag = document.createElement("span");
      tag.className = "box-tag" + (box.y * scale < 20 ? " inside" : "");
      tag.textContent = `${index + 1} ${labelOf(box.option)}` + (locked ? " (locked)" : "");
      el.append(tag);
      if (!locked) {
        const handle = document.createElement("span");
        handle.className = "box-handle";
        el.append(handle);
      }
      if (!hidden) canvas.querySelector(".canvas-stage").append(el);
      const item = document.createElement("li");
      item.append(swatch(box.option), `Box ${index + 1} at x ${box.x}, y ${box.y}, ${box.w}×${box.h} px` +
        (multiImage ? ` on image ${(box.image || 0) + 1}` : "") + " supports ");
      // Relink a box to another selected option.
      const relink = document.createElement("select");
      relink.setAttribute("aria-label", `Option of box ${index + 1}`);
      const choices = selected.includes(box.option) ? selected : [box.option, ...selected];
      choices.forEach((key) => relink.add(new Option(labelOf(key), key, false, key === box.option)));
      relink.addEventListener("change", () => {
        record();
        box.option = relink.value;
        renderBoxes();
        const again = list.querySelector(`li:nth-child(${index + 1}) select`);
        if (again) again.focus(); // the list was drawn again: the keyboard stays where it was
      });
      relink.disabled = locked;
      item.append(relink, " ");
      // The region list: show or hide a box on the image, lock it (no move, resize or delete), delete it.
      const uid = uidOf(box);
      // (The list is drawn again on every change: focus goes back to the same button.)
      const toggle = (set, kind, text) => {
        const button = document.createElement("button");
        button.type = "button";
        button.className = `link region-${kind}`;
        button.textContent = `${text} box ${index + 1}`;
        button.setAttribute("aria-pressed", set.has(uid) ? "true" : "false");
        button.addEventListener("click", (event) => {
          if (set.has(uid)) set.delete(uid); else set.add(uid);
          renderBoxes();
          const again = list.querySelector(`li:nth-child(${index + 1}) .region-${kind}`);
          // Pressed with the keyboard (Space): focus stays on the button; clicked or tapped: back to
          // the form, where Enter submits and the keys answer.
          if (event.detail === 0 && again) again.focus(); else focusForm();
        });
        return button;
      };
      const hide = toggle(hiddenBoxes, "hide", hidden ? "Show" : "Hide");
      const lock = toggle(lockedBoxes, "lock", locked ? "Unlock" : "Lock");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "link";
      remove.textContent = `Delete box ${index + 1}`;
      remove.disabled = locked;
      remove.addEventListener("click", () => {
        record();
        boxes.splice(index, 1);
        selectedBox = -1;
        renderBoxes();
        focusForm();
      });
      item.append(hide, " ", lock, " ", remove);
      if (hidden) item.classList.add("region-hidden");
      if (locked) item.classList.add("region-locked");
      list.append(item);
    });
    renderLegend(selected);
    save();
    changed();
  }

  // After a region-list action the focus goes back to the boxes question (the form), not to a
  // button where Enter would press it again.
  function focusForm() {
    if (!boxesField) return;
    boxesField.tabIndex = -1;
    boxesField.focus({ preventScroll: true });
  }
  const regionList = boxesField ? boxesField.querySelector(".box-list") : null;
  if (regionList) {
    // Enter on a region-list button submits, as everywhere in the form (the Submit bar says so); it
    // never toggles the button. Space presses it. (No list: a boxes question shown elsewhere.)
    regionList.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || !event.target.matches("button") || event.ctrlKey || event.metaKey || event.altKey) return;
      event.preventDefault();
      form.requestSubmit();
    });
  }

  // Moves a view by (dx, dy) screen pixels; on a touch screen what the image cannot take scrolls the
  // page, so a finger on a fitted image still moves the page.
  function panBy(viewport, dx, dy, page) {
    const left = viewport.scrollLeft;
    const top = viewport.scrollTop;
    viewport.scrollLeft = left + dx;
    viewport.scrollTop = top + dy;
    if (page) window.scrollBy(dx - (viewport.scrollLeft - left), dy - (viewport.scrollTop - top));
  }

  // --- pointer: draw, move, resize a box; or move the view (Pan, Space, middle button) ---
  canvases.forEach((canvas) => {
    const { viewport, img } = partsOf(canvas);
    if (!viewport) return;
    viewport.tabIndex = 0;
    if (boxesPanel) canvas.classList.add("drawable");
    let drag = null;
    // The middle button pans here, not the browser's autoscroll.
    viewport.addEventListener("mousedown", (event) => { if (event.button === 1) event.preventDefault(); });
    viewport.addEventListener("pointerenter", () => { hovered = canvas; });
    viewport.addEventListener("pointerleave", () => { if (hovered === canvas) hovered = null; });
    viewport.addEventListener("pointerdown", (event) => {
      // Working on the image leaves the form: Space then pans here instead of ticking the last option,
      // and the image has the focus (its number keys choose the label of new boxes, Enter submits).
      const active = document.activeElement;
      if (active && active !== document.body && control(active)) active.blur();
      if (document.activeElement !== viewport) viewport.focus({ preventScroll: true });
      const touch = event.pointerType === "touch";
      if (touch) {
        touches.set(event.pointerId, { x: event.clientX, y: event.clientY });
        if (touches.size === 2) { startPinch(); capture(event.pointerId); event.preventDefault(); return; }
        if (touches.size > 2) return;
      }
      const drawing = boxesPanel && !boxesField.disabled;
      if (event.button === 1 || (event.button === 0 && (panMode || spaceHeld || (touch && !drawing)))) {
        // (one finger on an image without boxes to draw moves it, and the page past its edges)
        drag = { mode: "pan", x: event.clientX, y: event.clientY, touch };
      } else if (event.button !== 0 || !drawing) {
        return;
      } else {
        const rect = img.getBoundingClientRect();
        const { width, height } = naturalOf(canvas);
        const per = { x: width / rect.width, y: height / rect.height }; // original pixels per screen pixel
        const px = clamp((event.clientX - rect.left) * per.x, 0, width);
        const py = clamp((event.clientY - rect.top) * per.y, 0, height);
        const option = optionSelect.value;
        // A drag inside a box moves it (from its corner, resizes it) when the box is selected or has
        // the label of new boxes; inside a box of another label it draws a new box, and a press
        // there without a drag selects that box (then a drag moves it). Shift + drag always draws.
        const boxEl = event.shiftKey ? null : event.target.closest(".box");
        const pressed = boxEl ? Number(boxEl.dataset.index) : -1;
        const handle = boxEl && event.target.classList.contains("box-handle");
        if (boxEl && (handle || pressed === selectedBox || boxes[pressed].option === option || !option)) {
          selectedBox = pressed;
          record();
          const box = boxes[selectedBox];
          drag = { mode: handle ? "resize" : "move", box, px, py, start: { ...box }, per, width, height, rect };
        } else {
          if (!option) {
            optionSelect.focus();
            optionSelect.classList.add("attention");
            return;
          }
          const box = { option, x: Math.round(px), y: Math.round(py), w: 1, h: 1 };
          if (multiImage) box.image = Number(canvas.dataset.image);
          record();
          boxes.push(box);
          selectedBox = boxes.length - 1;
          drag = { mode: "draw", box, px, py, per, width, height, rect, pressed: pressed >= 0 ? boxes[pressed] : null };
        }
      }
      capture(event.pointerId);
      event.preventDefault();
      if (drag.mode !== "pan") renderBoxes();
    });
    // Two fingers: pinch to zoom about their middle, move them to pan; a drag the first began is undone.
    function capture(pointerId) {
      try { viewport.setPointerCapture(pointerId); } catch (error) { /* not an active pointer */ }
    }
    function middle() {
      const [a, b] = Array.from(touches.values());
      const box = viewport.getBoundingClientRect();
      return { x: (a.x + b.x) / 2 - box.left, y: (a.y + b.y) / 2 - box.top, d: Math.hypot(a.x - b.x, a.y - b.y) };
    }
    // The fingers' middle on the screen: the pan follows it (the page may scroll under the fingers,
    // so not measured from the viewport, which moves with the page).
    function screenMiddle() {
      const [a, b] = Array.from(touches.values());
      return { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
    }
    function startPinch() {
      if (drag && drag.mode !== "pan") {
        if (history.length) boxes = history.pop();
        future.length = 0;
        selectedBox = -1;
        renderBoxes();
        refreshHistoryButtons();
      }
      drag = null;
      const at = middle();
      const on = screenMiddle();
      pinch = { zoom, d: Math.max(1, at.d), x: on.x, y: on.y };
    }
    viewport.addEventListener("pointermove", (event) => {
      if (touches.has(event.pointerId)) touches.set(event.pointerId, { x: event.clientX, y: event.clientY });
      if (pinch && touches.size >= 2) {
        const at = middle();
        setZoom(pinch.zoom * at.d / pinch.d, canvas, { x: at.x, y: at.y });
        const on = screenMiddle();
        panBy(viewport, pinch.x - on.x, pinch.y - on.y, true);
        pinch.x = on.x;
        pinch.y = on.y;
        event.preventDefault();
        return;
      }
      if (!drag) return;
      if (drag.mode === "pan") {
        panBy(viewport, drag.x - event.clientX, drag.y - event.clientY, drag.touch);
        drag.x = event.clientX;
        drag.y = event.clientY;
        return;
      }
      const x = clamp((event.clientX - drag.rect.left) * drag.per.x, 0, drag.width);
      const y = clamp((event.clientY - drag.rect.top) * drag.per.y, 0, drag.height);
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
    const finish = (event) => {
      if (event && touches.delete(event.pointerId) && pinch) {
        if (touches.size < 2) pinch = null;
        return;
      }
      if (!drag) return;
      // A click without a drag makes no box (3 screen pixels, whatever the zoom); a press on a box
      // that did not move it is no change to undo.
      if (drag.mode === "draw" && (drag.box.w < 3 * drag.per.x || drag.box.h < 3 * drag.per.y)) {
        boxes.splice(boxes.indexOf(drag.box), 1);
        selectedBox = drag.pressed ? boxes.indexOf(drag.pressed) : -1; // a press on a box selects it
        history.pop();
        refreshHistoryButtons();
      } else if ((drag.mode === "move" || drag.mode === "resize") &&
                 ["x", "y", "w", "h"].every((key) => drag.box[key] === drag.start[key])) {
        history.pop();
        refreshHistoryButtons();
      }
      const mode = drag.mode;
      drag = null;
      if (mode !== "pan") renderBoxes();
    };
    viewport.addEventListener("pointerup", finish);
    viewport.addEventListener("pointercancel", finish);
    // Touch on the image is the canvas's alone (touch-action: none in the CSS, and here for browsers
    // that start a gesture anyway): no page scroll, no pull to refresh, no swipe back to another page,
    // no click made up from a tap.
    const own = (event) => { if (event.cancelable) event.preventDefault(); };
    viewport.addEventListener("touchstart", own, { passive: false });
    viewport.addEventListener("touchmove", own, { passive: false });
    // The wheel zooms about the pointer; at the fit, zooming out lets the page scroll.
    viewport.addEventListener("wheel", (event) => {
      const lines = event.deltaMode === 1 ? 20 : event.deltaMode === 2 ? 400 : 1;
      const next = clamp(zoom * Math.exp(-event.deltaY * lines * 0.002), 1, MAX_ZOOM);
      if (next === zoom) return;
      event.preventDefault();
      const box = viewport.getBoundingClientRect();
      setZoom(next, canvas, { x: event.clientX - box.left, y: event.clientY - box.top });
    }, { passive: false });
    if (!img.complete) img.addEventListener("load", () => { layout(canvas); renderBoxes(); });
  });

  // --- boxes by keyboard, on a focused image: N adds one in the middle of the view, the arrows move
  // the selected box (Shift + arrows resize it) by 10 screen pixels, Esc lets the arrows pan again ---
  function addBoxByKey(canvas) {
    const option = optionSelect.value;
    if (!option) {
      optionSelect.focus();
      optionSelect.classList.add("attention");
      return;
    }
    const { viewport, img } = partsOf(canvas);
    const { width, height } = naturalOf(canvas);
    const view = viewport.getBoundingClientRect();
    const shown = img.getBoundingClientRect();
    const visibleWidth = Math.min(view.right, shown.right) - Math.max(view.left, shown.left);
    const visibleHeight = Math.min(view.bottom, shown.bottom) - Math.max(view.top, shown.top);
    const w = Math.max(1, Math.round((visibleWidth / 4) * width / shown.width));
    const h = Math.max(1, Math.round((visibleHeight / 4) * height / shown.height));
    const cx = ((Math.max(view.left, shown.left) + visibleWidth / 2) - shown.left) * width / shown.width;
    const cy = ((Math.max(view.top, shown.top) + visibleHeight / 2) - shown.top) * height / shown.height;
    const box = { option, x: Math.round(clamp(cx - w / 2, 0, width - w)), y: Math.round(clamp(cy - h / 2, 0, height - h)), w, h };
    if (multiImage) box.image = Number(canvas.dataset.image);
    record();
    boxes.push(box);
    selectedBox = boxes.length - 1;
    renderBoxes();
  }
  function nudge(key, resize, pixels) {
    const box = boxes[selectedBox];
    if (isLocked(box)) return;
    record();
    const canvas = canvasFor(box);
    const { width, height } = naturalOf(canvas);
    const step = Math.max(1, Math.round(pixels / (canvas.scale || 1)));
    const dx = key === "ArrowRight" ? step : key === "ArrowLeft" ? -step : 0;
    const dy = key === "ArrowDown" ? step : key === "ArrowUp" ? -step : 0;
    if (resize) {
      box.w = clamp(box.w + dx, 1, width - box.x);
      box.h = clamp(box.h + dy, 1, height - box.y);
    } else {
      box.x = clamp(box.x + dx, 0, width - box.w);
      box.y = clamp(box.y + dy, 0, height - box.h);
    }
    renderBoxes();
  }
  function selectedOn(viewport) {
    return selectedBox >= 0 && boxes[selectedBox] && canvasFor(boxes[selectedBox]).contains(viewport);
  }

  // --- keys: + - F zoom, Space + drag pans, arrows pan a focused image, Z and Delete edit boxes ---
  function typing(target) {
    return target.matches('input[type=text], input:not([type]), textarea, select');
  }
  // A form control with focus takes Space itself (a checkbox ticks, a button presses).
  function control(target) {
    return target.matches("input, select, textarea, button, summary, a[href], [contenteditable]");
  }
  // Ctrl+Z (Cmd+Z) undoes a change to the boxes, Ctrl+Shift+Z and Ctrl+Y redo it; a text field keeps
  // its own undo.
  // Ctrl + arrows on a focused image move the selected box by 50 screen pixels (Ctrl + Shift + arrows
  // resize it), for a box placed in a few presses.
  document.addEventListener("keydown", (event) => {
    if (!(event.ctrlKey || event.metaKey) || event.altKey || event.defaultPrevented || !boxesPanel) return;
    if ((overlay && !overlay.hidden) || typing(event.target)) return;
    const viewport = event.target.closest ? event.target.closest(".canvas-viewport") : null;
    if (event.ctrlKey && viewport && event.key.startsWith("Arrow") && selectedOn(viewport)) {
      event.preventDefault();
      nudge(event.key, event.shiftKey, BIG_STEP);
      return;
    }
    const key = event.key.toLowerCase();
    if (key === "z" && !event.shiftKey) { event.preventDefault(); undo(); }
    else if ((key === "z" && event.shiftKey) || (key === "y" && !event.shiftKey)) { event.preventDefault(); redo(); }
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if ((overlay && !overlay.hidden) || typing(event.target)) return;
    const viewport = event.target.closest ? event.target.closest(".canvas-viewport") : null;
    const key = event.key;
    if (key === "+" || key === "=") {
      event.preventDefault(); setZoom(zoom * ZOOM_STEP);
    } else if (key === "-" || key === "_") {
      event.preventDefault(); setZoom(zoom / ZOOM_STEP);
    } else if (key === "f" || key === "F") {
      event.preventDefault(); setZoom(1);
    } else if (key === " " && hovered && !control(event.target) && !event.repeat) {
      event.preventDefault(); spaceHeld = true; setPanMode(panMode);
    } else if (key === " " && hovered && !control(event.target)) {
      event.preventDefault();
    } else if (viewport && /^[0-9]$/.test(key) && boxesPanel && !boxesField.disabled) {
      // On the focused image the number keys choose the label of new boxes (the legend's Nth chip),
      // never an answer of the current question (annotate.js leaves a handled key alone).
      event.preventDefault();
      const chip = legend && legend.querySelector(`.legend-chip[data-digit="${key}"]`);
      if (chip) setActive(chip.dataset.option);
    } else if (viewport && (key === "n" || key === "N") && boxesPanel && !boxesField.disabled) {
      event.preventDefault(); addBoxByKey(viewport.closest(".box-canvas"));
    } else if (viewport && key.startsWith("Arrow") && selectedOn(viewport)) {
      event.preventDefault(); nudge(key, event.shiftKey, 10);
    } else if (viewport && key === "Escape" && selectedBox >= 0) {
      event.preventDefault(); selectedBox = -1; renderBoxes();
    } else if (viewport && key.startsWith("Arrow")) {
      event.preventDefault();
      const stepX = viewport.clientWidth / 10;
      const stepY = viewport.clientHeight / 10;
      if (key === "ArrowLeft") viewport.scrollLeft -= stepX;
      if (key === "ArrowRight") viewport.scrollLeft += stepX;
      if (key === "ArrowUp") viewport.scrollTop -= stepY;
      if (key === "ArrowDown") viewport.scrollTop += stepY;
    } else if ((key === "z" || key === "Z") && boxesPanel) {
      event.preventDefault(); if (event.shiftKey) redo(); else undo();
    } else if ((key === "Delete" || key === "Backspace") && selectedBox >= 0 && !isLocked(boxes[selectedBox])) {
      event.preventDefault(); record(); boxes.splice(selectedBox, 1); selectedBox = -1; renderBoxes();
    }
  });
  document.addEventListener("keyup", (event) => {
    if (event.key === " " && spaceHeld) { spaceHeld = false; setPanMode(panMode); }
  });
  window.addEventListener("blur", () => { if (spaceHeld) { spaceHeld = false; setPanMode(panMode); } });

  if (tools && canvases.length) {
    tools.hidden = false;
    if (boxesPanel) { // undo / redo for the boxes, for pointer and touch users too
      const button = (name, title, text) => {
        const made = document.createElement("button");
        made.type = "button";
        made.className = "secondary";
        made.dataset.history = name;
        made.title = title;
        made.textContent = text;
        made.disabled = true;
        tools.insertBefore(made, zoomLevel);
        return made;
      };
      undoButton = button("undo", touchOnly ? "Undo the last change to the boxes" :
        "Undo the last change to the boxes (Ctrl+Z)", "Undo");
      redoButton = button("redo", touchOnly ? "Redo" : "Redo (Ctrl+Shift+Z or Ctrl+Y)", "Redo");
    }
    tools.addEventListener("click", (event) => {
      const button = event.target.closest("button");
      if (!button) return;
      const step = button.dataset.zoom;
      if (step === "in") setZoom(zoom * ZOOM_STEP);
      else if (step === "out") setZoom(zoom / ZOOM_STEP);
      else if (step === "fit") setZoom(1);
      else if (button === panToggle) setPanMode(!panMode);
      else if (button === undoButton) undo();
      else if (button === redoButton) redo();
    });
  }
  if (optionSelect) {
    optionSelect.addEventListener("change", () => optionSelect.classList.remove("attention")); // (the form's change redraws)
  }
  form.addEventListener("change", refreshBoxOptions);
  window.addEventListener("resize", fitAll);
  // The legend above the image showing or growing fits again, so the image's bottom stays in view.
  if (legend && window.ResizeObserver) new ResizeObserver(() => { if (canvases.length) fitAll(); }).observe(legend);

  // --- before submit: every selected option needs a box when the protocol says so ---
  function problems() {
    if (!boxesPanel || boxesField.disabled || boxesPanel.dataset.boxesRequired !== "each_selected") return [];
    const boxed = new Set(boxes.map((box) => box.option));
    const missing = linkedSelection().filter((key) => !boxed.has(key));
    if (!missing.length) return [];
    const { nounOne, nounMany } = boxesPanel.dataset;
    const what = missing.length === 1 ? `1 selected ${nounOne} has` : `${missing.length} selected ${nounMany} have`;
    // (activate: the first of them becomes the label of new boxes when the submit is refused)
    return [{ fieldset: boxesField, text: `${what} no box: ${missing.map(labelOf).join(", ")}`, activate: missing[0] }];
  }
  window.workbenchCanvas = { problems, refresh: refreshBoxOptions, undo, redo, setActive };

  setZoom(1);
  refreshBoxOptions();
})();
