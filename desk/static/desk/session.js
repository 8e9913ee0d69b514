/* The desk's session in the browser: logging out clears what the scanner keeps for the session
 * (the door list in sessionStorage, the scans waiting to be sent in localStorage), after asking
 * when scans made offline are still waiting. Loaded on every desk page. */
(function () {
  "use strict";
  var form = document.getElementById("logout-form");
  if (!form) return;
  form.addEventListener("submit", function (event) {
    var waiting = [];
    try { waiting = JSON.parse(localStorage.getItem("desk.queue") || "[]"); } catch (e) { waiting = []; }
    if (waiting.length && !window.confirm(form.dataset.unsent)) {
      event.preventDefault();
      return;
    }
    // From here the scanner writes nothing more (desk.js reads this mark): a door-list refresh
    // still in flight must not put the list back. Cleared now, and again when the page goes.
    document.documentElement.dataset.deskLeaving = "1";
    clear();
    window.addEventListener("pagehide", clear);
  });

  function clear() {
    try {
      [localStorage, sessionStorage].forEach(function (store) {
        Object.keys(store).forEach(function (key) { if (key.indexOf("desk.") === 0) store.removeItem(key); });
      });
    } catch (e) { /* storage disabled: nothing kept */ }
  }
})();
