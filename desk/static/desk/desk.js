/* The desk scanner page (spec-overlay.md §5.2). Plain JS, no framework.
 *
 * Keyboard-wedge scanners type the barcode and press Enter: the form submits, the field is
 * cleared and refocused at once, and the answer is shown large, with colour, words and an icon.
 * A request that fails (server down, no answer within TIMEOUT_MS) is shown as "not recorded":
 * it never looks like a success. A ticket not paid yet carries a "To pay" badge beside the
 * answer, whatever the answer. On a multi-slot event the page admits for the slot chosen above
 * the field (`data-slot-id`): the scans and the counters say which.
 */
(function () {
  "use strict";

  var TIMEOUT_MS = 6000;
  var RECENT_MAX = 12;
  var POLL_MS = 15000;

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
    refused: { tone: "fail", icon: "warning", title: "Not recorded — the server refused the request" },
    pending: { tone: "idle", icon: "clock", title: "Checking…" },
    idle: { tone: "idle", icon: "dot", title: "Ready — scan a ticket" }
  };

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
    return d.toLocaleString([], { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
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
    fact("Ticket", data.ticket_name);
    fact("Slot", data.slot_name);
    if (data.sale_status && data.sale_status !== "free" && data.is_paid) fact(TEXT.payment, TEXT.paid);
    fact("Company", data.company_name);
    if (data.event_id && data.event_id !== eventId) fact("Event", data.event_name);
    if (data.date_closed) {
      fact("Checked in", (data.is_date_closed_today ? "today, " : "") + when(data.date_closed));
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

  function show(status, data, message) {
    var spec = STATUS[status] || STATUS.refused;
    result.className = "result tone-" + spec.tone;
    result.dataset.status = status;
    var head = result.querySelector(".result-head");
    var iconBox = head.querySelector(".result-icon");
    iconBox.replaceChildren(icon(spec.icon));
    head.querySelector(".result-title").textContent = titleOf(status, spec, data);
    var oldBadge = head.querySelector(".pay-badge");
    if (oldBadge) oldBadge.remove();
    if (data && data.has_to_pay) head.appendChild(payBadge("pay-badge"));
    var body = result.querySelector(".result-body");
    body.replaceChildren();
    if (message) body.appendChild(el("p", "message", message));
    if (data && data.id) body.appendChild(details(data));
    var ask = status === "need_manual_confirmation" && data && data.id;
    manual.hidden = !ask;
    confirmButton.dataset.registrationId = ask ? String(data.id) : "";
  }

  function remember(status, data, barcode) {
    var spec = STATUS[status] || STATUS.refused;
    var item = el("li", "recent-item tone-" + spec.tone);
    item.dataset.status = status;
    var mark = el("span", "recent-icon");
    mark.setAttribute("aria-hidden", "true");
    mark.appendChild(icon(spec.icon));
    item.appendChild(mark);
    item.appendChild(el("span", "recent-time", new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })));
    var statusText = el("span", "recent-status", titleOf(status, spec, data));
    if (data && data.has_to_pay) statusText.appendChild(payBadge("recent-pay"));
    item.appendChild(statusText);
    item.appendChild(el("span", "recent-name", (data && data.name) || barcode || ""));
    recent.insertBefore(item, recent.firstChild);
    while (recent.childNodes.length > RECENT_MAX) recent.removeChild(recent.lastChild);
    recentEmpty.hidden = true;
  }

  // POST JSON; resolves {ok, status, data} or {failed: true} when nothing came back in time.
  function post(url, payload) {
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
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

  function handle(answer, barcode, seq) {
    var status, message = null, data = null;
    if (answer.failed || answer.status >= 500 || (!answer.ok && !answer.data)) {
      // No answer, a timeout or a server error: the transaction did not commit.
      status = "not_recorded";
      message = barcode ? "Barcode " + barcode + " was not checked. Scan it again." : "Scan it again.";
    } else if (!answer.ok) {
      status = "refused";
      var error = answer.data && answer.data.error;
      message = error ? error.message + " (" + error.code + ")" : "HTTP " + answer.status;
      if (answer.status === 403) message += " — log in again if your session expired.";
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
    show("pending", null, "Barcode " + barcode);
    var payload = { barcode: barcode, event_id: eventId };
    if (slotId) payload.slot_id = slotId;
    post(root.dataset.scanUrl, payload).then(function (answer) {
      handle(answer, barcode, seq);
    });
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
    show("pending", null, "Confirming entry…");
    post(root.dataset.confirmUrl, { registration_id: id }).then(function (answer) {
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
})();
