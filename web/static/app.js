// litequeue dashboard: live counters over server-sent events, a job's live
// progress, and the select-all box of the jobs list. No framework, no
// build step. Everything the server sends is set as text, never as markup.
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
        // data-live-class="base": the element's classes are "base VALUE".
        if (el.dataset.liveClass !== undefined) el.className = el.dataset.liveClass + " " + v;
        if (el.classList.contains("badge")) {
          if (v === "0") el.setAttribute("data-zero", ""); else el.removeAttribute("data-zero");
        }
      });
    });
  }
  // A job's progress: the job page's stream sends "progress" events
  // ({has, fraction, percent, message, updated, ago, state}) and one "end" event
  // ({finished, state}) when the job is finished or the watch stopped.
  var box = document.querySelector("[data-progress-events]");
  if (box && window.EventSource) {
    var ps = new EventSource(box.dataset.progressEvents);
    var setState = function (state) {
      document.querySelectorAll("[data-job-state]").forEach(function (el) {
        el.textContent = state;
        el.className = "state " + state;
      });
    };
    ps.addEventListener("progress", function (ev) {
      var p = JSON.parse(ev.data);
      if (p.state) setState(p.state);
      if (!p.has) return;
      box.hidden = false;
      box.querySelector("progress").value = p.fraction;
      box.querySelector("progress").textContent = p.percent;
      box.querySelector(".pct").textContent = p.percent;
      box.querySelector(".msg").textContent = p.message;
      // The report's time as the server renders times: relative, with
      // the absolute UTC time on hover.
      var t = document.createElement("time");
      t.textContent = p.ago;
      t.title = p.updated;
      box.querySelector(".updated").replaceChildren(t);
    });
    ps.addEventListener("end", function (ev) {
      ps.close();
      var d = JSON.parse(ev.data);
      if (d.state) setState(d.state);
      var note = document.querySelector("[data-job-ended]");
      if (!note) return;
      note.textContent = d.finished ? "The job is " + d.state + ". " : "Live progress stopped: the job is gone (a success is deleted unless retention keeps it) or the dashboard's queue closed. ";
      var a = document.createElement("a");
      a.href = location.pathname;
      a.textContent = "Reload for its result";
      note.appendChild(a);
      note.hidden = false;
    });
  }
  // Select all / none on the jobs list.
  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      box.closest("form").querySelectorAll("input[name=id]").forEach(function (c) { c.checked = box.checked; });
    });
  });
})();
