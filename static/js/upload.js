// Items page: add items by drag and drop (images, folders, zips, manifests), by choosing a folder, or
// with the form's file fields, with a progress bar and a summary per upload (docs/import-export.md,
// "Uploading in the browser"). Without this script the form posts its two file fields as usual.
//
// What is sent, one request at a time (XMLHttpRequest, for its upload progress): each zip on its own
// (field "file"); a manifest on its own (field "file"); loose images in batches of at most
// BATCH_FILES files and the upload size limit (fields "images" and "paths", each image's path in
// the dropped folder). Loose images dropped with a manifest go in one request, since the manifest
// names them. The server checks every request as it checks a form post (size, types, paths, CSRF).
(function () {
  "use strict";
  var BATCH_FILES = 50; // Django refuses more than DATA_UPLOAD_MAX_NUMBER_FILES (100) files a request
  var IMAGE = /\.(png|jpe?g|webp|gif)$/i;
  var MANIFEST = /\.(csv|jsonl|ndjson)$/i;
  var ZIP = /\.zip$/i;

  var form = document.getElementById("upload-form");
  if (!form || !window.XMLHttpRequest || !window.FormData) return;
  var zone = document.getElementById("drop-zone");
  var folderInput = document.getElementById("upload-folder");
  var chooseFolder = document.getElementById("choose-folder");
  var fileInput = document.getElementById("upload-file");
  var imagesInput = document.getElementById("upload-images");
  var progress = document.getElementById("upload-progress");
  var bar = document.getElementById("upload-bar");
  var status = document.getElementById("upload-status");
  var results = document.getElementById("upload-results");
  var limit = parseInt(form.getAttribute("data-limit"), 10) || 200 * 1024 * 1024;
  var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  var busy = false;

  zone.hidden = false;

  function pathOf(file) {
    return file.uploadPath || file.webkitRelativePath || file.name;
  }

  // Requests for a list of files: [{field, files}].
  function plan(files) {
    var requests = [];
    var loose = [];
    var refused = [];
    files.forEach(function (file) {
      var name = pathOf(file);
      if (ZIP.test(name)) requests.push({ field: "file", files: [file] });
      else if (IMAGE.test(name) || MANIFEST.test(name)) loose.push(file);
      else if (!/(^|\/)\./.test(name)) refused.push(file); // hidden files (.DS_Store) are left out quietly
    });
    var manifests = loose.filter(function (file) { return MANIFEST.test(pathOf(file)); });
    if (loose.length === 1 && manifests.length === 1) {
      requests.push({ field: "file", files: loose });
    } else if (manifests.length) {
      requests.push({ field: "images", files: loose });
    } else {
      var batch = [];
      var size = 0;
      loose.forEach(function (file) {
        if (batch.length && (batch.length >= BATCH_FILES || size + file.size > limit)) {
          requests.push({ field: "images", files: batch });
          batch = [];
          size = 0;
        }
        batch.push(file);
        size += file.size;
      });
      if (batch.length) requests.push({ field: "images", files: batch });
    }
    return { requests: requests, refused: refused };
  }

  function describe(files) {
    var names = files.slice(0, 3).map(pathOf).join(", ");
    return files.length > 3 ? names + " and " + (files.length - 3) + " more" : names;
  }

  function addLink(li, href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    li.appendChild(document.createTextNode(" "));
    li.appendChild(a);
  }

  function report(request, answer) {
    var li = document.createElement("li");
    var what = document.createElement("strong");
    what.textContent = describe(request.files) + ": ";
    li.appendChild(what);
    if (answer.ok && answer.job) {
      li.className = "ok";
      var span = document.createElement("span");
      span.textContent = "queued as import " + answer.job.id + "; a worker imports it.";
      li.appendChild(span);
      watch(answer.job.status_url, span);
    } else if (answer.ok) {
      li.className = "ok";
      var text = "imported " + answer.created + " item" + (answer.created === 1 ? "" : "s");
      if (answer.references) text += " (" + answer.references + " without image files)";
      if (answer.duplicates && answer.duplicates.length) {
        text += "; skipped " + answer.duplicates.length + " already in the study: " +
          answer.duplicates.slice(0, 10).map(function (d) { return d.external_id; }).join(", ");
      }
      li.appendChild(document.createTextNode(text + "."));
      (answer.warnings || []).forEach(function (warning) {
        var p = document.createElement("p");
        p.textContent = "Warning: " + warning + ".";
        li.appendChild(p);
      });
    } else {
      li.className = "refused";
      li.appendChild(document.createTextNode("not imported. " + answer.error));
      if (answer.templates) {
        addLink(li, answer.templates.csv, "Manifest template (CSV)");
        addLink(li, answer.templates.jsonl, "(JSONL)");
      }
    }
    results.appendChild(li);
  }

  // An import job: ask its status every two seconds until it ends (done, failed, cancelled).
  function jobText(job) {
    if (job.status === "done") {
      if (job.summary) return "done: " + job.summary;
      return "imported " + job.report.created + " item" + (job.report.created === 1 ? "" : "s") + "." +
        ((job.report.warnings || []).length ? " Warning: " + job.report.warnings.join("; ") + "." : "");
    }
    if (job.status === "failed") return "not imported. " + job.error;
    if (job.status === "cancelled") return "cancelled; nothing imported.";
    return job.status + (job.worker_note ? " (" + job.worker_note + ")" : "") + "…";
  }

  function watch(url, span) {
    var request = new XMLHttpRequest();
    request.open("GET", url);
    request.setRequestHeader("Accept", "application/json");
    request.addEventListener("load", function () {
      var job;
      try { job = JSON.parse(request.responseText); } catch (error) { return; }
      span.textContent = jobText(job);
      if (job.status === "pending" || job.status === "running") {
        window.setTimeout(function () { watch(url, span); }, 2000);
      }
    });
    request.send();
  }

  Array.prototype.forEach.call(document.querySelectorAll(".import-job"), function (li) {
    var state = li.getAttribute("data-status");
    if (state === "pending" || state === "running") {
      watch(li.getAttribute("data-status-url"), li.querySelector(".import-job-status"));
    }
  });

  function send(request, done, onProgress) {
    var data = new FormData();
    data.append("csrfmiddlewaretoken", token);
    data.append("next", "items");
    request.files.forEach(function (file) {
      data.append(request.field, file, file.name);
      if (request.field === "images") data.append("paths", pathOf(file));
    });
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.setRequestHeader("X-CSRFToken", token);
    xhr.upload.addEventListener("progress", function (event) {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", function () {
      var answer;
      try {
        answer = JSON.parse(xhr.responseText);
      } catch (error) {
        answer = { ok: false, error: "The server refused the upload (" + xhr.status + " " + xhr.statusText + ")." };
      }
      done(answer);
    });
    xhr.addEventListener("error", function () {
      done({ ok: false, error: "The upload failed (network error); nothing of it was imported." });
    });
    xhr.send(data);
  }

  function upload(files) {
    if (busy || !files.length) return;
    var work = plan(files);
    work.refused.forEach(function (file) {
      report({ files: [file] }, { ok: false, error: "Not sent: only images, zips and CSV/JSONL manifests are accepted." });
    });
    if (!work.requests.length) return;
    busy = true;
    var total = 0;
    work.requests.forEach(function (request) {
      request.size = request.files.reduce(function (sum, file) { return sum + file.size; }, 0) || 1;
      total += request.size;
    });
    var sent = 0;
    var created = 0;
    progress.hidden = false;
    bar.value = 0;
    var index = 0;
    (function next() {
      if (index >= work.requests.length) {
        bar.value = 100;
        status.textContent = "Done: " + created + " item" + (created === 1 ? "" : "s") + " imported.";
        if (created) {
          var li = document.createElement("li");
          addLink(li, window.location.pathname, "Show the items");
          results.appendChild(li);
        }
        busy = false;
        return;
      }
      var request = work.requests[index];
      status.textContent = "Uploading " + (index + 1) + " of " + work.requests.length + ": " + describe(request.files);
      send(request, function (answer) {
        sent += request.size;
        if (answer.ok && !answer.job) created += answer.created;
        report(request, answer);
        index += 1;
        next();
      }, function (fraction) {
        bar.value = Math.round(100 * (sent + fraction * request.size) / total);
      });
    })();
  }

  // Folders dropped: walk their entries (readEntries answers in chunks until it answers none).
  function entryFiles(entry, into, then) {
    if (entry.isFile) {
      entry.file(function (file) {
        file.uploadPath = entry.fullPath.replace(/^\//, "");
        into.push(file);
        then();
      }, then);
    } else if (entry.isDirectory) {
      var reader = entry.createReader();
      var entries = [];
      (function read() {
        reader.readEntries(function (chunk) {
          if (!chunk.length) {
            walk(entries, into, then);
          } else {
            entries = entries.concat(Array.prototype.slice.call(chunk));
            read();
          }
        }, then);
      })();
    } else {
      then();
    }
  }

  function walk(entries, into, then) {
    var left = entries.length;
    if (!left) then();
    entries.forEach(function (entry) {
      entryFiles(entry, into, function () {
        left -= 1;
        if (left === 0) then();
      });
    });
  }

  zone.addEventListener("dragover", function (event) {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", function () { zone.classList.remove("dragging"); });
  zone.addEventListener("drop", function (event) {
    event.preventDefault();
    zone.classList.remove("dragging");
    var items = event.dataTransfer.items;
    var entries = [];
    if (items) {
      for (var i = 0; i < items.length; i += 1) {
        var entry = items[i].webkitGetAsEntry ? items[i].webkitGetAsEntry() : null;
        if (entry) entries.push(entry);
      }
    }
    if (entries.length) {
      var files = [];
      walk(entries, files, function () { upload(files); });
    } else {
      upload(Array.prototype.slice.call(event.dataTransfer.files));
    }
  });
  chooseFolder.addEventListener("click", function () { folderInput.click(); });
  folderInput.addEventListener("change", function () {
    upload(Array.prototype.slice.call(folderInput.files));
    folderInput.value = "";
  });
  form.addEventListener("submit", function (event) {
    var files = Array.prototype.slice.call(fileInput.files).concat(Array.prototype.slice.call(imagesInput.files));
    if (!files.length) return; // the server says what is missing
    event.preventDefault();
    upload(files);
    fileInput.value = "";
    imagesInput.value = "";
  });
})();
