/* The desk scanner page (spec-overlay.md §5.2). Plain JS, no framework.
 *
 * Keyboard-wedge scanners type the barcode and press Enter: the form submits, the field is
 * cleared and refocused at once, and the answer is shown large, with colour, words and an icon.
 * A request that fails (server down, no answer within TIMEOUT_MS) is shown as "not recorded":
 * it never looks like a success. A ticket not paid yet carries a "To pay" badge beside the
 * answer, whatever the answer. On a multi-slot event the page admits for the slot chosen above
 * the field (`data-slot-id`): the scans and the counters say which.
 *
 * Offline mode (docs/spec.md "Offline mode"): the page keeps the event's signed door list
 * (GET …/snapshot, on load and every minute) in memory and in sessionStorage. A scan whose POST
 * cannot reach the server (no network, a timeout, a gateway's 502/503/504; fast failures are
 * retried with backoff within TIMEOUT_MS) is decided from that list with the server's rules,
 * shown marked "Offline", and queued in localStorage with its nonce, its time and the list's
 * signature. When the network is back (the `online` event, or the probe every PROBE_MS) the
 * queue is sent in order, each scan with its nonce, so a retried send is harmless. The queue is
 * the browser's: every desk tab reads it before changing it and shows its length, and a tab
 * with the door list keeps the other tabs' queued admissions admitted. Every scan and
 * confirmation carries a fresh nonce. Logging out clears both stores (session.js).
 */
(function () {
  "use strict";

  var TIMEOUT_MS = 6000;
  var RECENT_MAX = 12;
  var POLL_MS = 15000;
  var SNAPSHOT_MS = 60000;
  var PROBE_MS = 5000;
  var BACKOFF_MS = [200, 600, 1500];
  var TRANSIENT = { 502: true, 503: true, 504: true };

  var root = document.getElementById("desk");
  if (!root) return;
  var form = document.getElementById("scan-form");
  var input = document.getElementById("barcode");
  var result = document.getElementById("result");
  var manual = document.getElementById("manual");
  var confirmButton = document.getElementById("confirm-button");
  var recent = document.getElementById("recent");
  var recentEmpty = document.getElementById("recent-empty");
  var attended = document.getElementById("count-attended");
  var expected = document.getElementById("count-expected");
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  var eventId = parseInt(root.dataset.eventId, 10);
  var slotId = root.dataset.slotId ? parseInt(root.dataset.slotId, 10) : null;
  var slotForm = document.getElementById("slot-form");
  // Words the server translated (a JSON data block: no inline script under the CSP).
  var textsNode = document.getElementById("desk-texts");
  var TEXT = textsNode ? JSON.parse(textsNode.textContent) : {};
  var countersUrl = root.dataset.countersUrl + (slotId ? "?slot_id=" + slotId : "");
  var net = document.getElementById("net");
  var netText = document.getElementById("net-text");
  var listAge = document.getElementById("list-age");
  var queueCount = document.getElementById("queue-count");
  var conflictBox = document.getElementById("conflicts");
  var conflictList = document.getElementById("conflict-list");
  var user = document.body.dataset.user || "";
  var SNAP_KEY = "desk.snapshot." + eventId;
  var QUEUE_KEY = "desk.queue";
  var OWNER_KEY = "desk.owner";

  // Fill "%(name)s" placeholders of a translated text.
  function fmt(text, values) {
    return String(text || "").replace(/%\((\w+)\)s/g, function (all, name) {
      return values[name] === undefined ? all : String(values[name]);
    });
  }

  var ICONS = {
    check: "M4 12.5l5 5L20 6.5",
    cross: "M6 6l12 12M18 6L6 18",
    repeat: "M4 12a8 8 0 0 1 14-5.3M20 4v4h-4M20 12a8 8 0 0 1-14 5.3M4 20v-4h4",
    question: "M12 2.5a9.5 9.5 0 1 0 0 19a9.5 9.5 0 0 0 0-19zM9.2 9.3a2.9 2.9 0 1 1 4.2 2.6c-.8.4-1.4 1.1-1.4 2v.6M12 17.3h.01",
    warning: "M12 3l10 18H2L12 3zM12 10v5M12 18h.01",
    clock: "M12 3a9 9 0 1 0 0 18a9 9 0 0 0 0-18zM12 7v5l3 3",
    dot: "M12 8a4 4 0 1 0 0 8a4 4 0 0 0 0-8z"
  };

  // Every answer has its words, its icon and its tone (colour): never the colour alone.
  var STATUS = {
    confirmed_registration: { tone: "ok", icon: "check", title: "Checked in — welcome", admit: true },
    already_registered: { tone: "warn", icon: "repeat", title: "Already registered — this ticket was already scanned" },
    need_manual_confirmation: { tone: "ask", icon: "question", title: "Ticket for another event — check before admitting" },
    canceled_registration: { tone: "bad", icon: "cross", title: "Cancelled ticket — do not admit" },
    unconfirmed_registration: { tone: "bad", icon: "cross", title: "Unconfirmed registration — do not admit" },
    not_ongoing_event: { tone: "bad", icon: "cross", title: "Event is over or cancelled — do not admit" },
    invalid_ticket: { tone: "bad", icon: "cross", title: "Unknown ticket — do not admit" },
    not_recorded: { tone: "fail", icon: "warning", title: "Not recorded — scan again" },
    conflict: { tone: "bad", icon: "warning", title: "Admitted twice" },
    refused: { tone: "fail", icon: "warning", title: "Not recorded — the server refused the request" },
    pending: { tone: "idle", icon: "clock", title: "Checking…" },
    idle: { tone: "idle", icon: "dot", title: "Ready — scan a ticket" }
  };
  // The titles in the page's language (the page's texts; the English above when missing).
  Object.keys(STATUS).forEach(function (key) {
    if (TEXT["status_" + key]) STATUS[key].title = TEXT["status_" + key];
  });
  var LANG = document.documentElement.lang || undefined;

  var latest = 0; // the newest request: only its answer takes the big panel

  function icon(name) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "48");
    svg.setAttribute("height", "48");
    svg.setAttribute("focusable", "false");
    var path = document.createElementNS(ns, "path");
    path.setAttribute("d", ICONS[name]);
    svg.appendChild(path);
    return svg;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function when(iso) {
    if (!iso) return "";
    var d = new Date(iso);
    return d.toLocaleString(LANG, { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  }

  function details(data) {
    var box = el("div", "details");
    if (data.name) box.appendChild(el("p", "attendee", data.name));
    var facts = el("dl", "facts");
    function fact(label, value) {
      if (value === undefined || value === null || value === "") return;
      facts.appendChild(el("dt", null, label));
      facts.appendChild(el("dd", null, value));
    }
    fact(TEXT.fact_ticket, data.ticket_name);
    fact(TEXT.fact_slot, data.slot_name);
    if (data.sale_status && data.sale_status !== "free" && data.is_paid) fact(TEXT.payment, TEXT.paid);
    fact(TEXT.fact_company, data.company_name);
    if (data.event_id && data.event_id !== eventId) fact(TEXT.fact_event, data.event_name);
    if (data.date_closed) {
      var at = when(data.date_closed);
      fact(TEXT.fact_checked_in, data.is_date_closed_today ? fmt(TEXT.checked_in_today, { time: at }) : at);
    }
    if (facts.childNodes.length) box.appendChild(facts);
    if (data.registration_answers && data.registration_answers.length) {
      var answers = el("ul", "answers");
      data.registration_answers.forEach(function (text) { answers.appendChild(el("li", null, text)); });
      box.appendChild(answers);
    }
    if (data.has_to_pay) {
      var pay = el("p", "to-pay");
      pay.appendChild(icon("warning"));
      pay.appendChild(el("span", null, TEXT.to_pay));
      box.appendChild(pay);
    }
    return box;
  }

  function payBadge(className) {
    var badge = el("span", className, TEXT.to_pay_badge);
    badge.dataset.flag = "to-pay";
    return badge;
  }

  // Step 5 answers alike for another event and for another slot of this one: say which.
  function titleOf(status, spec, data) {
    if (status === "need_manual_confirmation" && data && data.event_id === eventId) return TEXT.other_slot;
    return spec.title;
  }

  function offlineBadge(className) {
    var badge = el("span", className, TEXT.offline_badge);
    badge.dataset.flag = "offline";
    return badge;
  }

  function show(status, data, message, offline) {
    var spec = STATUS[status] || STATUS.refused;
    result.className = "result tone-" + spec.tone + (offline ? " is-offline" : "");
    result.dataset.status = status;
    result.dataset.offline = offline ? "true" : "false";
    var head = result.querySelector(".result-head");
    var iconBox = head.querySelector(".result-icon");
    iconBox.replaceChildren(icon(spec.icon));
    head.querySelector(".result-title").textContent = titleOf(status, spec, data);
    var oldBadge = head.querySelector(".pay-badge");
    if (oldBadge) oldBadge.remove();
    var oldOffline = result.querySelector(".offline-badge");
    if (oldOffline) oldOffline.remove();
    if (offline) result.insertBefore(offlineBadge("offline-badge"), head);
    if (data && data.has_to_pay) head.appendChild(payBadge("pay-badge"));
    var body = result.querySelector(".result-body");
    body.replaceChildren();
    if (message) body.appendChild(el("p", "message", message));
    if (data && data.id) body.appendChild(details(data));
    var ask = !offline && status === "need_manual_confirmation" && data && data.id;
    manual.hidden = !ask;
    confirmButton.dataset.registrationId = ask ? String(data.id) : "";
  }

  function remember(status, data, barcode, offline) {
    var spec = STATUS[status] || STATUS.refused;
    var item = el("li", "recent-item tone-" + spec.tone);
    item.dataset.status = status;
    if (offline) item.dataset.offline = "true";
    var mark = el("span", "recent-icon");
    mark.setAttribute("aria-hidden", "true");
    mark.appendChild(icon(spec.icon));
    item.appendChild(mark);
    item.appendChild(el("span", "recent-time", new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })));
    var statusText = el("span", "recent-status", titleOf(status, spec, data));
    if (data && data.has_to_pay) statusText.appendChild(payBadge("recent-pay"));
    if (offline) statusText.appendChild(offlineBadge("recent-offline"));
    item.appendChild(statusText);
    item.appendChild(el("span", "recent-name", (data && data.name) || barcode || ""));
    recent.insertBefore(item, recent.firstChild);
    while (recent.childNodes.length > RECENT_MAX) recent.removeChild(recent.lastChild);
    recentEmpty.hidden = true;
  }

  // POST JSON; resolves {ok, status, data} or {failed: true} when nothing came back in time.
  function post(url, payload, timeout) {
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, timeout || TIMEOUT_MS);
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, "Accept": "application/json" },
      body: JSON.stringify(payload),
      signal: controller.signal
    }).then(function (response) {
      return response.json().then(
        function (data) { return { ok: response.ok, status: response.status, data: data }; },
        function () { return { ok: false, status: response.status, data: null }; }
      );
    }).catch(function () {
      return { failed: true };
    }).finally(function () { clearTimeout(timer); });
  }

  function nonce() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return (b + 256).toString(16).slice(1); }).join("");
  }

  function wait(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  function transient(answer) { return answer.failed || TRANSIENT[answer.status] === true; }

  // POST with retries of fast transient failures (backoff), all within TIMEOUT_MS: a request
  // that times out has spent the budget. Offline, no retry: the answer is decided at once.
  function postRetrying(url, payload) {
    var deadline = Date.now() + TIMEOUT_MS;
    function attempt(n) {
      if (navigator.onLine === false) return Promise.resolve({ failed: true });
      return post(url, payload, Math.max(deadline - Date.now(), 1)).then(function (answer) {
        if (!transient(answer)) { goOnline(); return answer; }
        var pause = BACKOFF_MS[n];
        if (pause === undefined || Date.now() + pause >= deadline || navigator.onLine === false) return answer;
        return wait(pause).then(function () { return attempt(n + 1); });
      });
    }
    return attempt(0);
  }

  function handle(answer, barcode, seq) {
    var status, message = null, data = null;
    if (answer.failed || answer.status >= 500 || (!answer.ok && !answer.data)) {
      // No answer, a timeout or a server error: the transaction did not commit.
      status = "not_recorded";
      message = barcode ? fmt(TEXT.not_checked, { barcode: barcode }) : TEXT.scan_again;
    } else if (!answer.ok) {
      status = "refused";
      var error = answer.data && answer.data.error;
      message = error ? error.message + " (" + error.code + ")" : "HTTP " + answer.status;
      if (answer.status === 403) message += " — " + TEXT.session_expired;
    } else {
      data = answer.data;
      status = data.status;
    }
    if (seq === latest) show(status, data, message);
    remember(status, data, barcode);
    if (status === "confirmed_registration") refreshCounters();
  }

  function scan(barcode) {
    var seq = ++latest;
    show("pending", null, fmt(TEXT.barcode, { barcode: barcode }));
    var payload = { barcode: barcode, event_id: eventId, nonce: nonce() };
    if (slotId) payload.slot_id = slotId;
    var scannedAt = new Date().toISOString();
    postRetrying(root.dataset.scanUrl, payload).then(function (answer) {
      if (transient(answer) && snap) {
        goOffline();
        return decideOffline(payload, scannedAt, seq);
      }
      handle(answer, barcode, seq);
    });
  }

  // --- offline mode ---------------------------------------------------------------------------

  var snap = null; // the door list: the snapshot as served, plus `index` (key → entry)
  var hmacKey = null; // the CryptoKey of snap.barcode_key
  var queue = []; // this tab's copy of the queue (readQueue)
  var queueStored = true; // false while localStorage refuses the queue: it is then this tab's alone
  var offline = false;
  var draining = false;
  var conflicts = 0;

  function storageGet(store, key) {
    try { return JSON.parse(store.getItem(key) || "null"); } catch (e) { return null; }
  }
  function storageSet(store, key, value) {
    if (document.documentElement.dataset.deskLeaving) return false; // logging out (session.js)
    try { store.setItem(key, JSON.stringify(value)); return true; } catch (e) { return false; } // full or disabled: memory only
  }

  // Another user's leftovers (a logout that did not run session.js): never read them.
  function claimStorage() {
    try {
      if (localStorage.getItem(OWNER_KEY) !== user) {
        [localStorage, sessionStorage].forEach(function (store) {
          Object.keys(store).forEach(function (key) { if (key.indexOf("desk.") === 0) store.removeItem(key); });
        });
        localStorage.setItem(OWNER_KEY, user);
      }
    } catch (e) { /* storage disabled: the page works from memory */ }
  }

  function hex(buffer) {
    return Array.prototype.map.call(new Uint8Array(buffer), function (b) { return (b + 256).toString(16).slice(1); }).join("");
  }
  function bytes(hexText) {
    var out = new Uint8Array(hexText.length / 2);
    for (var i = 0; i < out.length; i++) out[i] = parseInt(hexText.substr(i * 2, 2), 16);
    return out;
  }

  function useSnapshot(data) {
    var index = {};
    data.registrations.forEach(function (entry) { index[entry.key] = entry; });
    return crypto.subtle.importKey("raw", bytes(data.barcode_key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"])
      .then(function (key) {
        hmacKey = key;
        snap = data;
        snap.index = index;
        showNet();
      });
  }

  function saveSnapshot() {
    if (!snap) return;
    var copy = {};
    Object.keys(snap).forEach(function (k) { if (k !== "index") copy[k] = snap[k]; });
    storageSet(sessionStorage, SNAP_KEY, copy);
  }

  function fetchSnapshot() {
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
    return fetch(root.dataset.snapshotUrl, { credentials: "same-origin", headers: { "Accept": "application/json" }, signal: controller.signal })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || !data.registrations) return false;
        goOnline();
        return useSnapshot(data).then(function () {
          saveSnapshot();
          return markQueuedAdmissions();
        }).then(function () { return true; });
      })
      .catch(function () { return false; })
      .finally(function () { clearTimeout(timer); });
  }

  function keyOf(code) {
    return crypto.subtle.sign("HMAC", hmacKey, new TextEncoder().encode(code)).then(hex);
  }

  // The server's branch order (spec-overlay.md §5.1) on the door list: this event's tickets.
  function decide(entry, now) {
    if (!entry) return "invalid_ticket";
    if (entry.state === "cancel") return "canceled_registration";
    if (entry.state === "draft") return "unconfirmed_registration";
    if (snap.event.closed || new Date(snap.event.date_end) <= now) return "not_ongoing_event";
    if (entry.state === "open") {
      if (slotId && entry.slot_id !== slotId) return "need_manual_confirmation";
      return "confirmed_registration";
    }
    return "already_registered";
  }

  function decideOffline(payload, scannedAt, seq) {
    var barcode = payload.barcode;
    return keyOf(barcode.trim()).then(function (key) {
      var entry = snap.index[key];
      var status = decide(entry, new Date(scannedAt));
      var data = null;
      if (entry) {
        data = {
          id: entry.id, name: entry.name, ticket_name: entry.ticket_name, slot_name: entry.slot_name,
          has_to_pay: entry.has_to_pay, date_closed: entry.date_closed, event_id: eventId,
          is_date_closed_today: entry.date_closed ? new Date(entry.date_closed).toDateString() === new Date().toDateString() : false
        };
      }
      if (status === "confirmed_registration") {
        entry.state = "done";
        entry.date_closed = scannedAt;
        saveSnapshot();
        attended.textContent = String(parseInt(attended.textContent, 10) + 1);
      }
      readQueue().push({
        nonce: payload.nonce, barcode: barcode, event_id: payload.event_id, slot_id: payload.slot_id || null,
        scanned_at: scannedAt, offline: true, offline_status: status, snapshot: snap.signature
      });
      saveQueue();
      var message = fmt(TEXT.offline_decided, { time: clock(snap.generated_at) });
      if (status === "need_manual_confirmation") message += " " + TEXT.offline_manual;
      if (seq === latest) show(status, data, message, true);
      remember(status, data, barcode, true);
    });
  }

  function clock(iso) {
    return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  }

  // The queue is the browser's, shared by every desk tab: a tab reads it from localStorage
  // before each change, so it never writes back the queue as it last saw it, without the scans
  // another tab queued since. Entries this page could not have written are not sent.
  function readQueue() {
    if (!queueStored) return queue; // storage refused it: this tab's copy is the queue
    var stored = storageGet(localStorage, QUEUE_KEY);
    queue = Array.isArray(stored) ? stored.filter(isQueuedScan) : [];
    return queue;
  }
  function isQueuedScan(item) {
    return item !== null && typeof item === "object" && typeof item.barcode === "string" && typeof item.nonce === "string";
  }
  function saveQueue() {
    queueStored = storageSet(localStorage, QUEUE_KEY, queue);
    showNet();
  }
  // Admissions made offline (by any tab) and not sent yet stay admitted in this tab's list,
  // a list fetched since included. Each list hashes with a key of its own, so the queued
  // barcodes are hashed again with the current one.
  function markQueuedAdmissions() {
    var admitted = readQueue().filter(function (item) {
      return item.offline_status === "confirmed_registration" && item.event_id === eventId;
    });
    var list = snap;
    if (!list || !hmacKey || !admitted.length) return Promise.resolve();
    return Promise.all(admitted.map(function (item) { return keyOf(item.barcode.trim()); }))
      .then(function (keys) {
        if (snap !== list) return; // a newer list came meanwhile, marked on its own
        keys.forEach(function (key) {
          var entry = list.index[key];
          if (entry && entry.state === "open") entry.state = "done";
        });
        saveSnapshot();
      });
  }

  function goOffline() {
    if (offline) return;
    offline = true;
    showNet();
  }

  function goOnline() {
    if (!offline) return;
    offline = false;
    showNet();
    drain();
  }

  function showNet() {
    if (!net) return;
    var mode = offline ? "offline" : (queue.length ? "sending" : "online");
    net.dataset.mode = mode;
    netText.textContent = offline ? TEXT.net_offline : (queue.length ? TEXT.net_sending : TEXT.net_online);
    queueCount.textContent = String(queue.length);
    net.querySelector(".net-queue").hidden = queue.length === 0;
    if (!snap) {
      listAge.textContent = TEXT.list_none;
      listAge.dataset.age = "none";
    } else {
      var minutes = Math.floor((Date.now() - new Date(snap.generated_at).getTime()) / 60000);
      listAge.textContent = minutes < 1 ? TEXT.list_fresh : fmt(TEXT.list_age, { minutes: minutes });
      listAge.dataset.age = minutes >= 5 ? "stale" : "fresh";
    }
  }

  function reportConflict(item, data) {
    conflicts += 1;
    conflictBox.hidden = false;
    var spec = STATUS[data.status] || STATUS.refused;
    var line = el("li", null, fmt(TEXT.conflict, { name: data.name || item.barcode, status: spec.title }));
    line.dataset.registrationId = String(data.id || "");
    conflictList.insertBefore(line, conflictList.firstChild);
    remember("conflict", data, item.barcode, false);
  }

  // Send the queue in order, one scan at a time; stop at the first that cannot reach the server
  // (it stays first, and the probe tries again). A refusal (4xx) is shown and dropped, except
  // 403: the session ended, the queue waits for a new login.
  function drain() {
    if (draining || !readQueue().length) return;
    draining = true;
    showNet();
    var item = queue[0];
    var payload = {};
    Object.keys(item).forEach(function (k) { if (k !== "key") payload[k] = item[k]; }); // "key": a list hash that entries queued by an earlier version of this page carry
    post(root.dataset.scanUrl, payload).then(function (answer) {
      draining = false;
      if (transient(answer) || answer.status >= 500 || answer.status === 403 || (!answer.ok && !answer.data)) {
        if (transient(answer)) goOffline();
        showNet();
        return;
      }
      // Sent: out of the queue as it is now (another tab may have sent it too, or added to it).
      queue = readQueue().filter(function (queued) { return queued.nonce !== item.nonce; });
      saveQueue();
      if (answer.ok) {
        if (answer.data.offline_conflict) reportConflict(item, answer.data);
      } else {
        var error = answer.data && answer.data.error;
        remember("refused", null, fmt(TEXT.replay_refused, { barcode: item.barcode, why: error ? error.code : answer.status }), false);
      }
      if (queue.length) { drain(); return; }
      refreshCounters();
      fetchSnapshot();
    });
  }

  function probe() {
    if (readQueue().length) { drain(); return; }
    if (offline) fetchSnapshot();
    showNet();
  }

  function refreshCounters() {
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
    fetch(countersUrl, { credentials: "same-origin", headers: { "Accept": "application/json" }, signal: controller.signal })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) return;
        attended.textContent = String(data.attended);
        expected.textContent = String(data.expected);
      })
      .catch(function () { /* counters are informative; the next poll retries */ })
      .finally(function () { clearTimeout(timer); });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var barcode = input.value.trim();
    input.value = "";
    input.focus();
    if (barcode) scan(barcode);
  });

  confirmButton.addEventListener("click", function () {
    var id = parseInt(confirmButton.dataset.registrationId, 10);
    if (!id) return;
    var seq = ++latest;
    manual.hidden = true;
    show("pending", null, TEXT.confirming);
    post(root.dataset.confirmUrl, { registration_id: id, nonce: nonce() }).then(function (answer) {
      handle(answer, "", seq);
      input.focus();
    });
  });

  // A scanner types wherever the focus is: bring stray keystrokes back to the barcode field.
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target === input || target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT";
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key.length === 1 && target.tagName !== "BUTTON" && target.tagName !== "A") input.focus();
  });

  // Choosing a slot reloads the page for it (the form also works without this script).
  if (slotForm) {
    slotForm.querySelector("select").addEventListener("change", function () { slotForm.submit(); });
  }

  show("idle", null, null);
  input.focus();
  setInterval(refreshCounters, POLL_MS);

  claimStorage();
  readQueue();
  var kept = storageGet(sessionStorage, SNAP_KEY);
  (kept && kept.registrations && window.crypto && crypto.subtle ? useSnapshot(kept) : Promise.resolve())
    .then(function () { showNet(); return fetchSnapshot(); })
    .then(function () { drain(); });
  setInterval(function () { if (!offline) fetchSnapshot(); }, SNAPSHOT_MS);
  setInterval(probe, PROBE_MS);
  window.addEventListener("online", function () { offline = false; showNet(); drain(); fetchSnapshot(); });
  window.addEventListener("offline", goOffline);
  // Another desk tab of this browser queued or sent a scan.
  window.addEventListener("storage", function (event) {
    if (event.storageArea !== localStorage || (event.key !== QUEUE_KEY && event.key !== null)) return;
    markQueuedAdmissions();
    showNet();
  });
})();
