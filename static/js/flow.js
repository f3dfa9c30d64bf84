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

  // --- drafts: one per user and assignment, kept on the server while the lease is the annotator's
  // (PUT to data-draft-url, debounced; the page comes with it in #server-draft) and in localStorage,
  // where one made offline waits ("pending") until it can be sent ---
  const PREFIX = "workbench-draft:";
  const SEND_MS = 800;
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
  // The server keeps drafts of a live lease only (the page then carries #server-draft, null without one).
  const serverScript = document.getElementById("server-draft");
  const serverKeeps = Boolean(serverScript && head.dataset.draftUrl);
  let serverFields = null;
  if (serverKeeps) { try { serverFields = JSON.parse(serverScript.textContent); } catch (error) { serverFields = null; } }
  let initial = "";
  let sentText = serverFields ? JSON.stringify(serverFields) : ""; // what the server holds now
  function keepLocal(fields, pending) {
    if (!store) return;
    try { store.setItem(key, JSON.stringify({ saved: Date.now(), fields, pending })); } catch (error) { /* full */ }
  }
  function save() {
    const fields = snapshot();
    const text = JSON.stringify(fields);
    if (text === initial) { // nothing changed since the page came
      if (store) store.removeItem(key);
      if (sentText) send(null);
      return;
    }
    keepLocal(fields, serverKeeps && text !== sentText);
    if (serverKeeps && text !== sentText) { window.clearTimeout(sending); sending = window.setTimeout(() => send(fields), SEND_MS); }
  }
  // PUT the draft (or DELETE it: fields null). A network failure leaves it pending in localStorage,
  // sent again when the browser is back online; a refusal (the lease is over, too large) is not retried.
  let sending = 0;
  let refused = false;
  let answered = sentText; // the last draft the server answered (kept, or refused as not valid)
  function send(fields, keepalive) {
    const token = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (!serverKeeps || refused || !token) return;
    const text = fields ? JSON.stringify(fields) : "";
    const options = { method: fields ? "PUT" : "DELETE", credentials: "same-origin", keepalive: Boolean(keepalive),
                      headers: { "X-CSRFToken": token.value, "Content-Type": "application/json" } };
    if (fields) options.body = JSON.stringify({ fields });
    fetch(head.dataset.draftUrl, options).then((response) => {
      answered = text;
      if (response.ok) {
        sentText = text;
        head.dataset.draftSent = String(Number(head.dataset.draftSent || 0) + 1);
        if (fields && store && !sent && JSON.stringify(snapshot()) === text) keepLocal(fields, false);
      } else if (response.status !== 400) {
        refused = true; // 409: the lease is no longer theirs; 413: too large; 404: not theirs
      }
    }).catch(() => { /* offline: kept pending in localStorage */ });
  }
  window.addEventListener("online", () => {
    if (!store || !serverKeeps) return;
    try {
      const waiting = JSON.parse(store.getItem(key) || "null");
      if (waiting && waiting.pending && Array.isArray(waiting.fields)) send(waiting.fields);
    } catch (error) { /* unreadable: nothing to send */ }
  });
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
  // Which draft: one made here and not yet sent (offline) is the newest; else the server's, made on
  // any device; else this browser's own.
  if (draft && !Array.isArray(draft.fields)) draft = null;
  let toSend = null;
  if (serverKeeps && !(draft && draft.pending) && serverFields && serverFields.length) {
    draft = { fields: serverFields };
    keepLocal(serverFields, false);
  } else if (serverKeeps && draft && JSON.stringify(draft.fields) !== sentText) {
    toSend = draft.fields;
  }
  // A refused submit comes back with what was posted: newer than any draft, so it wins.
  if (draft && !head.dataset.refused) {
    restore(draft.fields);
    head.dataset.restored = "1";
    const note = document.createElement("p");
    note.className = "muted draft-note";
    note.id = "draft-note";
    note.setAttribute("role", "status");
    // (an item already submitted, in its edit view: what was restored are changes not yet saved)
    note.textContent = head.dataset.editing ? "Your changes not yet saved were restored." :
      "Your answers not yet submitted were restored.";
    // Beside Submit (the sticky bar), where it is seen after a reload; else under the heading.
    (document.getElementById("draft-note-slot") || head).append(note);
  }
  // What the page came with once annotate.js has set it up (it fills hidden fields), to tell a real
  // change from none; after a restore every save keeps the draft.
  const restored = head.dataset.restored === "1";
  document.addEventListener("DOMContentLoaded", () => { if (!restored) initial = JSON.stringify(snapshot()); });

  // Saved on every change; boxes change the hidden input without events, so pointer and key ends save too,
  // and leaving the page saves what is there.
  if (toSend) send(toSend);
  let pending = 0;
  function later() { window.clearTimeout(pending); pending = window.setTimeout(save, 150); }
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  document.addEventListener("pointerup", later);
  document.addEventListener("keyup", later);
  window.addEventListener("pagehide", () => {
    window.clearTimeout(pending);
    if (sent) return;
    save();
    window.clearTimeout(sending);
    const text = JSON.stringify(snapshot());
    if (serverKeeps && text !== initial && text !== answered) send(JSON.parse(text), true);
  });

  // A submit (or a skip) ends the draft: the server now has the answers, or the item is given up.
  // A refused submit answers with the posted values, which are saved again as soon as they change.
  let sent = false;
  form.addEventListener("submit", (event) => {
    window.setTimeout(() => {
      if (event.defaultPrevented) return; // annotate.js stopped it (answers the protocol requires)
      sent = true;
      window.clearTimeout(pending);
      window.clearTimeout(sending); // the server drops its copy on submit
      if (store) store.removeItem(key);
    }, 0);
  });
  const skipForm = document.getElementById("skip-form");
  if (skipForm) {
    skipForm.addEventListener("submit", () => {
      sent = true;
      window.clearTimeout(sending);
      if (store) store.removeItem(key);
    });
  }
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
          link.append("Next →");
          if (!window.matchMedia("(hover: none) and (pointer: coarse)").matches) { // no key hint on touch
            const key = document.createElement("kbd");
            key.setAttribute("aria-hidden", "true");
            key.textContent = "]";
            link.append(" ", key);
          }
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
