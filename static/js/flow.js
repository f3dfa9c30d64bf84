// The annotator's flow on the task page: drafts of answers not yet submitted, and the Previous / Next
// keys ([ and ]). Plain JavaScript, no build step (the CSP allows only script-src 'self').
// Loaded before annotate.js (both deferred, so in document order): a draft is put back into the form
// before annotate.js reads it (the boxes' hidden input, the options already seen), so show_if, the
// pages of options and the boxes all start from the restored answers. docs/annotating.md, "Drafts".
(function () {
  "use strict";
  const head = document.getElementById("flow");
  const form = document.getElementById("task-form");
  if (!head || !form) return;

  // --- drafts: one per user and assignment, in localStorage ---
  const PREFIX = "workbench-draft:";
  const KEEP_MS = 14 * 24 * 3600 * 1000; // drafts older than two weeks are dropped
  const key = PREFIX + head.dataset.draftKey;
  const store = (() => { try { return window.localStorage; } catch (error) { return null; } })();
  const skipped = new Set(["csrfmiddlewaretoken", "time_spent_ms"]);

  function snapshot() {
    const fields = [];
    for (const element of form.elements) {
      if (!element.name || skipped.has(element.name) || element.disabled && element.type !== "hidden") continue;
      if (element.type === "radio" || element.type === "checkbox") {
        if (element.checked) fields.push([element.name, element.value]);
      } else if (element.tagName === "INPUT" || element.tagName === "TEXTAREA" || element.tagName === "SELECT") {
        fields.push([element.name, element.value]);
      }
    }
    return fields;
  }
  let initial = "";
  function save() {
    if (!store) return;
    const fields = snapshot();
    const text = JSON.stringify(fields);
    if (text === initial) { store.removeItem(key); return; } // nothing changed since the page came
    try { store.setItem(key, JSON.stringify({ saved: Date.now(), fields })); } catch (error) { /* full */ }
  }
  function restore(fields) {
    const values = new Map();
    for (const [name, value] of fields) {
      if (!values.has(name)) values.set(name, []);
      values.get(name).push(value);
    }
    for (const element of form.elements) {
      if (!element.name || skipped.has(element.name)) continue;
      const given = values.get(element.name) || [];
      if (element.type === "radio" || element.type === "checkbox") {
        element.checked = given.includes(element.value);
      } else if (given.length) {
        element.value = given[0];
        // multi questions: what was shown before counts as seen again (annotate.js reads data-seen).
        if (element.classList.contains("shown-value")) element.dataset.seen = given[0];
      }
    }
  }
  function prune() {
    if (!store) return;
    const now = Date.now();
    for (let i = store.length - 1; i >= 0; i--) {
      const name = store.key(i);
      if (!name || !name.startsWith(PREFIX) || name === key) continue;
      try {
        if (now - JSON.parse(store.getItem(name)).saved > KEEP_MS) store.removeItem(name);
      } catch (error) { store.removeItem(name); }
    }
  }

  let draft = null;
  if (store) {
    try { draft = JSON.parse(store.getItem(key) || "null"); } catch (error) { draft = null; }
    prune();
  }
  // A refused submit comes back with what was posted: newer than any draft, so it wins.
  if (draft && Array.isArray(draft.fields) && !head.dataset.refused) {
    restore(draft.fields);
    head.dataset.restored = "1";
    const note = document.createElement("p");
    note.className = "muted draft-note";
    note.id = "draft-note";
    note.setAttribute("role", "status");
    note.textContent = "Your answers not yet submitted were restored.";
    // Beside Submit (the sticky bar), where it is seen after a reload; else under the heading.
    (document.getElementById("draft-note-slot") || head).append(note);
  }
  // What the page came with once annotate.js has set it up (it fills hidden fields), to tell a real
  // change from none; after a restore every save keeps the draft.
  const restored = head.dataset.restored === "1";
  document.addEventListener("DOMContentLoaded", () => { if (!restored) initial = JSON.stringify(snapshot()); });

  // Saved on every change; boxes change the hidden input without events, so pointer and key ends save too,
  // and leaving the page saves what is there.
  let pending = 0;
  function later() { window.clearTimeout(pending); pending = window.setTimeout(save, 150); }
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  document.addEventListener("pointerup", later);
  document.addEventListener("keyup", later);
  window.addEventListener("pagehide", () => { window.clearTimeout(pending); if (!sent) save(); });

  // A submit (or a skip) ends the draft: the server now has the answers, or the item is given up.
  // A refused submit answers with the posted values, which are saved again as soon as they change.
  let sent = false;
  form.addEventListener("submit", (event) => {
    window.setTimeout(() => {
      if (event.defaultPrevented) return; // annotate.js stopped it (answers the protocol requires)
      sent = true;
      window.clearTimeout(pending);
      if (store) store.removeItem(key);
    }, 0);
  });
  const skipForm = document.getElementById("skip-form");
  if (skipForm) skipForm.addEventListener("submit", () => { sent = true; if (store) store.removeItem(key); });
  window.addEventListener("pageshow", (event) => { if (event.persisted) sent = false; });

  // --- the next item, leased ahead once this page is shown: its image prefetched, offered as Next ---
  function leaseAhead() {
    const url = head.dataset.ahead;
    const token = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (!url || !token) return;
    fetch(url, { method: "POST", headers: { "X-CSRFToken": token.value }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : null))
      .then((next) => {
        if (!next) return;
        if (next.image) {
          const preload = new Image();
          preload.src = next.image;
        }
        const nav = document.getElementById("flow-nav");
        if (next.task && nav && !document.getElementById("flow-next")) {
          const link = document.createElement("a");
          link.className = "button secondary";
          link.id = "flow-next";
          link.rel = "next";
          link.href = next.task;
          const key = document.createElement("kbd");
          key.setAttribute("aria-hidden", "true");
          key.textContent = "]";
          link.append("Next → ", key);
          nav.append(link);
          nav.hidden = false;
        }
      })
      .catch(() => { /* offline: the next submit claims the next item itself */ });
  }
  if (document.readyState === "complete") leaseAhead(); else window.addEventListener("load", leaseAhead);

  // --- Previous / Next: [ and ] (the links themselves work without JavaScript) ---
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (event.key !== "[" && event.key !== "]") return;
    const target = event.target;
    if (target.matches("input[type=text], input:not([type]), textarea, select, [contenteditable]")) return;
    const overlay = document.getElementById("help-overlay");
    if (overlay && !overlay.hidden) return;
    const link = document.getElementById(event.key === "[" ? "flow-previous" : "flow-next");
    if (!link) return;
    event.preventDefault();
    save();
    link.click();
  });
})();
