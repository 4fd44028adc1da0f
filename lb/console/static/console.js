// holdfast-lb console: reloads the page's content every data-refresh
// milliseconds (the server renders it), shows times in the browser's time
// zone, and asks for confirmation before a form with data-confirm posts.
(function () {
  "use strict";
  var content = document.getElementById("content");
  var stale = document.getElementById("stale");
  var every = parseInt(document.body.getAttribute("data-refresh"), 10) || 0;

  function localTimes(root) {
    var ts = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < ts.length; i++) {
      if (ts[i].hasAttribute("data-ago")) continue;
      var d = new Date(ts[i].getAttribute("datetime"));
      if (!isNaN(d.getTime()) && d.getFullYear() > 1970) {
        ts[i].title = ts[i].textContent;
        ts[i].textContent = d.toLocaleString();
      }
    }
  }

  var busy = false; // a form is being submitted: leave the page alone
  // A press on a control holds the content until shortly after the
  // release, so that a refresh never replaces a button between the press
  // and the click (the click would be lost).
  var holdUntil = 0;
  document.addEventListener("pointerdown", function (ev) {
    if (ev.target && ev.target.closest && ev.target.closest("form, button, a")) {
      holdUntil = Date.now() + 5000;
    }
  }, true);
  document.addEventListener("pointerup", function () {
    if (holdUntil > Date.now()) holdUntil = Date.now() + 500;
  }, true);
  function held() { return busy || Date.now() < holdUntil; }
  function refresh() {
    if (held() || document.hidden) {
      schedule();
      return;
    }
    var ctl = typeof AbortController === "function" ? new AbortController() : null;
    var timer = ctl ? setTimeout(function () { ctl.abort(); }, Math.max(5000, 3 * every)) : null;
    fetch(location.pathname + location.search, {
      headers: { "X-Holdfast-Fragment": "1", "Accept": "text/html" },
      credentials: "same-origin",
      cache: "no-store",
      signal: ctl ? ctl.signal : undefined
    }).then(function (r) {
      if (!r.ok && r.status !== 404) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      if (!held()) {
        content.innerHTML = html;
        localTimes(content);
      }
      stale.hidden = true;
      document.body.setAttribute("data-refreshed", String(Date.now()));
    }).catch(function () {
      stale.hidden = false;
    }).then(function () {
      if (timer) clearTimeout(timer);
      schedule();
    });
  }
  function schedule() {
    if (every > 0) setTimeout(refresh, every);
  }

  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      ev.preventDefault();
      return;
    }
    busy = true;
    var b = ev.target.querySelector("button");
    if (b) b.disabled = true;
  });

  localTimes(content);
  schedule();
})();
