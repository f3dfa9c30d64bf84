// The researcher's study page and crowd pages (docs/annotating.md, docs/crowd.md):
// - tabs over the study page's sections (deep-linkable with #fragment; without JS they are sections);
// - Copy buttons (invitation links, the completion code) with an aria-live "Copied";
// - the People tab's account autocomplete (a <datalist> filled from a JSON endpoint);
// - the invitation page's demographic form builder, which writes the JSON the YAML box holds;
// - the Export tab's background exports and the Report tab's report jobs (templates/reports/study.html:
//   the same data-export-job rows), whose status is polled (every 2 s, backing off while nothing
//   changes or the server is away) until each is done, failed or cancelled;
// - the Report tab's preview, fetched after the page from its own URL into the sandboxed frame.
// Everything is built with DOM calls and textContent: no untrusted text is ever parsed as HTML in the
// page. The one HTML handed to a parser is the report preview, as the srcdoc of an <iframe sandbox="">
// (an opaque origin where nothing runs), as the server used to write it into the page.
(function () {
  "use strict";

  // --- Tabs --------------------------------------------------------------------------------------
  function setUpTabs() {
    const nav = document.getElementById("study-tabs");
    if (!nav) return;
    const links = Array.from(nav.querySelectorAll("a[data-tab]"));
    const panels = links.map((link) => document.getElementById(link.dataset.tab)).filter(Boolean);
    if (!panels.length) return;
    const list = nav.querySelector("ul");
    list.setAttribute("role", "tablist");
    links.forEach((link) => {
      link.setAttribute("role", "tab");
      link.setAttribute("aria-controls", link.dataset.tab);
      link.parentElement.setAttribute("role", "presentation");
    });
    panels.forEach((panel) => {
      panel.setAttribute("role", "tabpanel");
      panel.setAttribute("aria-labelledby", "tab-" + panel.id);
    });
    document.body.classList.add("tabs-ready");

    function panelOf(hash) {
      const id = (hash || "").replace(/^#/, "");
      if (!id) return null;
      const target = document.getElementById(id);
      if (!target) return null;
      return panels.find((panel) => panel === target || panel.contains(target)) || null;
    }

    function show(panel, focus) {
      panels.forEach((other) => {
        const on = other === panel;
        other.hidden = !on;
        const link = document.getElementById("tab-" + other.id);
        link.setAttribute("aria-selected", on ? "true" : "false");
        link.tabIndex = on ? 0 : -1;
        link.classList.toggle("current", on);
      });
      if (focus) document.getElementById("tab-" + panel.id).focus();
    }

    links.forEach((link, index) => {
      link.addEventListener("click", (event) => {
        event.preventDefault();
        const panel = document.getElementById(link.dataset.tab);
        show(panel, false);
        history.replaceState(null, "", "#" + panel.id);
      });
      link.addEventListener("keydown", (event) => {
        let next = null;
        if (event.key === "ArrowRight") next = links[(index + 1) % links.length];
        else if (event.key === "ArrowLeft") next = links[(index - 1 + links.length) % links.length];
        else if (event.key === "Home") next = links[0];
        else if (event.key === "End") next = links[links.length - 1];
        if (!next) return;
        event.preventDefault();
        show(document.getElementById(next.dataset.tab), true);
        history.replaceState(null, "", "#" + next.dataset.tab);
      });
    });

    // Links inside the page to a tab (the setup checklist's) switch tabs too.
    document.addEventListener("click", (event) => {
      const anchor = event.target.closest("a[href^='#']");
      if (!anchor || nav.contains(anchor)) return;
      const panel = panelOf(anchor.getAttribute("href"));
      if (!panel) return;
      event.preventDefault();
      show(panel, false);
      history.replaceState(null, "", "#" + panel.id);
      panel.focus();
    });
    window.addEventListener("hashchange", () => {
      const panel = panelOf(location.hash);
      if (panel) show(panel, false);
    });
    show(panelOf(location.hash) || panels[0], false);
  }

  // --- Copy buttons ------------------------------------------------------------------------------
  function announce(text) {
    const status = document.getElementById("copy-status");
    if (!status) return;
    status.textContent = "";
    window.setTimeout(() => { status.textContent = text; }, 50);
  }

  function selectText(element) {
    const range = document.createRange();
    range.selectNodeContents(element);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function setUpCopyButtons() {
    document.querySelectorAll("button.copy-button[data-copy-target]").forEach((button) => {
      const target = document.getElementById(button.dataset.copyTarget);
      if (!target) return;
      button.hidden = false;
      const label = button.textContent;
      button.addEventListener("click", async () => {
        const text = target.textContent.trim();
        let copied = false;
        try {
          if (navigator.clipboard && window.isSecureContext) {
            await navigator.clipboard.writeText(text);
            copied = true;
          }
        } catch (error) {
          copied = false;
        }
        if (!copied) {
          // No clipboard API (plain http) or refused: select the text so Ctrl+C copies it.
          selectText(target);
          try {
            copied = document.execCommand("copy");
          } catch (error) {
            copied = false;
          }
        }
        button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
        announce(copied ? "Copied" : "The text is selected: press Ctrl+C (or Cmd+C) to copy it");
        window.setTimeout(() => { button.textContent = label; }, 2000);
      });
    });
  }

  // --- Enrolment autocomplete --------------------------------------------------------------------
  function setUpEnrolAutocomplete() {
    const input = document.getElementById("enroll-username");
    const list = document.getElementById("enroll-suggestions");
    if (!input || !list || !input.dataset.candidatesUrl) return;
    const status = document.getElementById("enroll-status");
    let timer = null;
    let asked = "";
    async function suggest() {
      const prefix = input.value.trim();
      if (prefix === asked) return;
      asked = prefix;
      if (!prefix) { list.replaceChildren(); return; }
      try {
        const url = input.dataset.candidatesUrl + "?q=" + encodeURIComponent(prefix);
        const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!response.ok || asked !== prefix) return;
        const data = await response.json();
        const options = data.results.map((row) => {
          const option = document.createElement("option");
          option.value = row.username;
          if (row.name) option.label = row.username + " (" + row.name + ")";
          return option;
        });
        list.replaceChildren(...options);
        list.dataset.prefix = prefix;
        if (status) status.textContent = options.length + " account" + (options.length === 1 ? "" : "s") + " found";
      } catch (error) {
        // The server still checks the typed name; suggestions are a convenience.
      }
    }
    input.addEventListener("input", () => {
      window.clearTimeout(timer);
      timer = window.setTimeout(suggest, 200);
    });
  }

  // --- Demographic form builder ------------------------------------------------------------------
  const KINDS = [["choice", "Single choice"], ["number", "Number"], ["text", "Free text"]];

  function keyFromLabel(label, used) {
    let key = label.toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "").replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "");
    if (!/^[a-z]/.test(key)) key = "q_" + key;
    key = key.slice(0, 36).replace(/_+$/, "") || "q";
    let unique = key;
    for (let n = 2; used.has(unique); n += 1) unique = key + "_" + n;
    return unique;
  }

  function setUpBuilder() {
    const builder = document.getElementById("demographics-builder");
    const box = document.getElementById("id_demographics");
    if (!builder || !box) return;
    const list = document.getElementById("builder-questions");
    const note = document.getElementById("builder-note");
    const status = document.getElementById("builder-status");
    const add = document.getElementById("builder-add");
    const usage = note.textContent;
    let fields = [];

    // Read the box: JSON (what the builder writes) fills the builder; hand-written YAML stays in the
    // box, which the server checks the same way. Returns whether the builder can edit it.
    function load() {
      const text = box.value.trim();
      let parsed = [];
      if (text) {
        try {
          parsed = JSON.parse(text);
          const editable = (f) => f && typeof f === "object" && !Array.isArray(f);
          if (!Array.isArray(parsed) || !parsed.every(editable)) throw new Error("not a list of fields");
        } catch (error) {
          fields = [];
          note.textContent = "This form is written as YAML: edit it in the box below, or clear the box to use the builder.";
          add.hidden = true;
          list.replaceChildren();
          return false;
        }
      }
      fields = parsed.map((field) => ({
        key: String(field.key || ""),
        label: String(field.label || ""),
        kind: ["choice", "number", "text"].includes(field.kind) ? field.kind : "text",
        choices: Array.isArray(field.choices) ? field.choices.map(String) : [],
        required: field.required !== false,
        keyEdited: !!field.key,
      }));
      note.textContent = usage;
      add.hidden = false;
      return true;
    }
    builder.hidden = false;

    function write() {
      const used = new Set();
      const out = fields.map((field) => {
        if (!field.keyEdited || !field.key) field.key = keyFromLabel(field.label || "question", used);
        used.add(field.key);
        const entry = { key: field.key, label: field.label, kind: field.kind };
        if (field.kind === "choice") entry.choices = field.choices.filter((c) => c.trim() !== "");
        if (!field.required) entry.required = false;
        return entry;
      });
      box.value = out.length ? JSON.stringify(out, null, 2) : "";
    }

    function control(labelText, element) {
      const wrap = document.createElement("label");
      wrap.className = "builder-control";
      wrap.append(document.createTextNode(labelText + " "), element);
      return wrap;
    }

    function render(focusIndex, focusSelector) {
      list.replaceChildren();
      fields.forEach((field, index) => {
        const item = document.createElement("li");
        item.className = "builder-question";
        const number = index + 1;

        const label = document.createElement("input");
        label.type = "text";
        label.className = "builder-label";
        label.maxLength = 200;
        label.value = field.label;
        label.addEventListener("input", () => { field.label = label.value; write(); });

        const kind = document.createElement("select");
        kind.className = "builder-kind";
        KINDS.forEach(([value, text]) => {
          const option = document.createElement("option");
          option.value = value;
          option.textContent = text;
          option.selected = value === field.kind;
          kind.append(option);
        });
        kind.addEventListener("change", () => { field.kind = kind.value; write(); render(index, ".builder-kind"); });

        const required = document.createElement("input");
        required.type = "checkbox";
        required.className = "builder-required";
        required.checked = field.required;
        required.addEventListener("change", () => { field.required = required.checked; write(); });

        item.append(control("Question " + number + ": label", label), control("Type", kind), control("Required", required));

        if (field.kind === "choice") {
          const choices = document.createElement("textarea");
          choices.className = "builder-choices";
          choices.rows = 3;
          choices.value = field.choices.join("\n");
          choices.addEventListener("input", () => { field.choices = choices.value.split("\n"); write(); });
          item.append(control("Options (one a line)", choices));
        }

        const actions = document.createElement("div");
        actions.className = "builder-actions";
        [["up", "Move up", index > 0], ["down", "Move down", index < fields.length - 1], ["remove", "Remove", true]].forEach(
          ([action, text, enabled]) => {
            const button = document.createElement("button");
            button.type = "button";
            button.className = "button secondary builder-" + action;
            button.textContent = text;
            button.setAttribute("aria-label", text + " question " + number);
            button.disabled = !enabled;
            button.addEventListener("click", () => {
              if (action === "remove") {
                fields.splice(index, 1);
                status.textContent = "Question " + number + " removed";
                write();
                render(Math.min(index, fields.length - 1), ".builder-label");
                if (!fields.length) add.focus();
                return;
              }
              const to = action === "up" ? index - 1 : index + 1;
              [fields[index], fields[to]] = [fields[to], fields[index]];
              status.textContent = "Question moved to position " + (to + 1);
              write();
              render(to, ".builder-" + action);
            });
            actions.append(button);
          }
        );
        item.append(actions);
        list.append(item);
      });
      if (focusIndex !== undefined && focusIndex >= 0 && list.children[focusIndex]) {
        const target = list.children[focusIndex].querySelector(focusSelector);
        if (target && !target.disabled) target.focus();
        else list.children[focusIndex].querySelector(".builder-label").focus();
      }
    }

    add.addEventListener("click", () => {
      fields.push({ key: "", label: "", kind: "choice", choices: [], required: true, keyEdited: false });
      status.textContent = "Question " + fields.length + " added";
      write();
      render(fields.length - 1, ".builder-label");
    });
    box.addEventListener("input", () => { if (load()) render(); });
    if (load()) render();
  }

  // --- Background exports: live status ----------------------------------------------------------
  // Every 2 s while a job changes; each quiet round (or failed request) waits half as long again, up
  // to 10 s; polling ends when no row is pending or running.
  const EXPORT_POLL_MS = 2000;
  const EXPORT_POLL_MAX_MS = 10000;
  const EXPORT_LABELS = { pending: "Pending", running: "Running", done: "Done", failed: "Failed", cancelled: "Cancelled" };
  function setUpExportStatus() {
    const rows = Array.from(document.querySelectorAll("li[data-export-job]"));
    const open = () => rows.filter((row) => ["pending", "running"].includes(row.dataset.status));
    if (!open().length) return;
    let delay = EXPORT_POLL_MS;
    async function poll() {
      let changed = false;
      for (const row of open()) {
        try {
          const response = await fetch(row.dataset.statusUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
          if (!response.ok) continue;
          const job = await response.json();
          if (job.status === row.dataset.status) continue;
          changed = true;
          row.dataset.status = job.status;
          row.querySelector(".export-status").textContent = EXPORT_LABELS[job.status] || job.status;
          if (job.status === "done" && row.dataset.downloadUrl && !row.querySelector("a")) {
            const link = document.createElement("a");
            link.href = row.dataset.downloadUrl;
            // a report row names its file, as the server writes it (an export row says "download")
            link.textContent = "reportJob" in row.dataset && job.filename ? "download " + job.filename : "download";
            row.append(" · ", link);
            if (job.supplement_url && row.dataset.supplementUrl) {
              // every findings table in full, beside the report (the page's address, not the API's)
              const supplement = document.createElement("a");
              supplement.href = row.dataset.supplementUrl;
              supplement.className = "report-supplement";
              supplement.textContent = "every table in full (CSV zip)";
              row.append(" · ", supplement);
            }
          } else if (job.error) {
            row.append(" · " + job.error);
          }
        } catch (error) {
          // the server is away for a moment: try again at the next tick
        }
      }
      delay = changed ? EXPORT_POLL_MS : Math.min(Math.round(delay * 1.5), EXPORT_POLL_MAX_MS);
      if (open().length) window.setTimeout(poll, delay);
    }
    window.setTimeout(poll, delay);
  }

  // --- The Report tab's preview ------------------------------------------------------------------
  // The tab answers without it (reports/views.py); the report's HTML page comes from the preview's URL
  // and becomes the srcdoc of the frame, whose sandbox="" (no script, an opaque origin) is set again
  // first. A refusal's reason (plain text) or the failure is said in the frame's place (role=status).
  function setUpReportPreview() {
    const box = document.getElementById("report-preview-box");
    const frame = document.getElementById("report-preview");
    const status = document.getElementById("report-preview-status");
    if (!box || !frame || !status || !box.dataset.previewUrl) return;
    function fail(reason) {
      status.classList.remove("muted");
      status.classList.add("error");
      status.textContent = "The preview could not be loaded: " + reason;
    }
    async function load() {
      let response;
      try {
        response = await fetch(box.dataset.previewUrl, {
          credentials: "same-origin",
          redirect: "manual",
          headers: { Accept: "text/html" },
        });
      } catch (error) {
        fail("the server could not be reached. Reload the page to try again.");
        return;
      }
      if (response.type === "opaqueredirect") {
        fail("you are signed out. Reload the page to sign in again.");
        return;
      }
      let text = "";
      try {
        text = await response.text();
      } catch (error) {
        fail("its answer was cut short. Reload the page to try again.");
        return;
      }
      if (!response.ok) {
        const plain = (response.headers.get("Content-Type") || "").startsWith("text/plain");
        const reason = plain ? text.trim().slice(0, 500) : "";
        fail(reason || "the server answered " + response.status + ". Reload the page to try again.");
        return;
      }
      frame.setAttribute("sandbox", "");
      frame.addEventListener("load", () => {
        frame.hidden = false;
        status.textContent = "Preview loaded.";
        status.classList.add("visually-hidden");
      }, { once: true });
      frame.srcdoc = text;
    }
    load();
  }

  setUpTabs();
  setUpCopyButtons();
  setUpEnrolAutocomplete();
  setUpBuilder();
  setUpExportStatus();
  setUpReportPreview();
})();
