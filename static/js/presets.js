// New study page: the preview follows the protocol chosen in the list (without this script every
// preview is a <details> the researcher opens). The list starts with no choice: the page asks, and
// shows no preview until one is chosen. Choosing a protocol file selects "my own protocol" ("own").
(function () {
  "use strict";
  var form = document.getElementById("study-create-form");
  var select = document.getElementById("id_preset");
  var file = document.getElementById("id_protocol_file");
  var own = document.getElementById("preview-own");
  var none = document.getElementById("preview-none");
  if (!form || !select) return;
  var previews = document.querySelectorAll(".preset-preview");

  function show() {
    previews.forEach(function (details) {
      var chosen = details.getAttribute("data-preset") === select.value;
      details.hidden = !chosen;
      details.open = chosen;
    });
    if (own) own.hidden = select.value !== "own";
    if (none) none.hidden = select.value !== "";
  }

  select.addEventListener("change", show);
  if (file) {
    file.addEventListener("change", function () {
      if (file.files && file.files.length) {
        select.value = "own";
        show();
      }
    });
  }
  show();
})();
