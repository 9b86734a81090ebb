// litequeue dashboard: live counters over server-sent events, and the
// select-all box of the jobs list. No framework, no build step.
"use strict";
(function () {
  // Live refresh: the server sends {"queue/field": "text", ...}; every
  // element with a matching data-live attribute shows the new text.
  var url = document.body.dataset.events;
  if (url && window.EventSource) {
    var es = new EventSource(url);
    es.addEventListener("summary", function (ev) {
      var data = JSON.parse(ev.data);
      document.querySelectorAll("[data-live]").forEach(function (el) {
        var v = data[el.dataset.live];
        if (v === undefined) return;
        if (el.textContent !== v) el.textContent = v;
        if (el.classList.contains("badge")) {
          if (v === "0") el.setAttribute("data-zero", ""); else el.removeAttribute("data-zero");
        }
      });
    });
  }
  // Select all / none on the jobs list.
  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      box.closest("form").querySelectorAll("input[name=id]").forEach(function (c) { c.checked = box.checked; });
    });
  });
})();
