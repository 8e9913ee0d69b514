"""The desk surface (spec-overlay.md §5.2): pages and the JSON verbs, all thin.

Who: an active staff user with `events.checkin_registration` (the Event desk group has it).
Pages send an anonymous visitor to the login page and answer 403 to other staff; the JSON
routes answer 403 `{"error": …}` to both. CSRF is enforced on the POSTs by Django's own check,
run here (not by the global middleware) so that a failure answers in the pinned JSON shape.

Every answer under /desk/api/ is JSON `{"error": {"code", "message"}}` when it is not the
verb's: 405 wrong method, 403 `csrf_failed` / `forbidden`, 415 a body not declared
`application/json`, 400 `invalid_value` (not a JSON object, or a form Django cannot read),
413 `payload_too_large` (DATA_UPLOAD_MAX_MEMORY_SIZE), 404 `not_found` (no such route), 503
`service_unavailable` (the database), 500 `server_error` (anything unexpected, logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.utils import timezone
from django.utils.decorators import decorator_from_middleware
from django.utils.translation import gettext
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie

import desk.api_schemas  # noqa: F401 - the component schemas the operations below name
from desk import selectors
from desk.errors import CsrfFailed, Forbidden, MethodNotAllowed
from desk.services import ScanStatus, confirm_attendance, offline, register_attendee
from desk.services.attendance import check_nonce
from desk.services.offline import Replay
from events import inputs
from events import rules as core_rules
from events.api_schemas import ID_TEXT
from events.errors import Code, DomainError, NotFound, ValidationFailed, http_status
from events.openapi import api, json_answer, json_body, ref
from events.views_api import (
    DATABASE_UNAVAILABLE,
    JSON_TYPE,
    TRANSPORT_ERRORS,
    database_unavailable,
    transport_error,
)

logger = logging.getLogger("desk.api")

PERMISSION = "events.checkin_registration"
SESSION = ({"deskSession": []},)
# The answers every desk API route may give before its verb runs.
GUARD_ERRORS = ("forbidden", "service_unavailable", "server_error")


def can_use_desk(user) -> bool:
    """An active staff user holding PERMISSION: Django's `has_perm` (a superuser holds every
    permission; otherwise the model backend's grants, to the user or to one of its groups).
    The signed-in user is read with its grants (config.auth.ModelBackend.get_user), so asking
    costs no query; a request reads its user anew, so a revoked grant holds from the next
    request."""
    return user.is_active and user.is_staff and user.has_perm(PERMISSION)


def error_response(error: DomainError) -> JsonResponse:
    response = JsonResponse(error.as_dict(), status=http_status(error.code))
    response["Cache-Control"] = "private, no-store"
    return response


class _JsonCsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering a refusal as `{"error": {"code": "csrf_failed"}}`."""

    def _reject(self, request: HttpRequest, reason: str) -> JsonResponse:
        return error_response(CsrfFailed(_("CSRF check failed: %(reason)s") % {"reason": reason}))


_csrf_check = decorator_from_middleware(_JsonCsrfCheck)


def desk_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not can_use_desk(request.user):
            raise PermissionDenied(_("The desk needs the check-in permission."))
        return view(request, *args, **kwargs)

    return wrapped


def desk_api(*, method: str) -> Callable:
    """JSON route: method, then CSRF (POST), then who, then the body's type (POST); typed
    errors → JSON, a body too large → 413 (also when the CSRF check reads a form body), a
    database fault → 503 `service_unavailable` (the rescan of an admitted ticket answers
    `already_registered`), anything else → 500 JSON."""

    def decorate(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if not can_use_desk(request.user):
                return error_response(Forbidden(_("A desk login is needed (staff, check-in).")))
            if method == "POST" and request.content_type != JSON_TYPE:
                return transport_error(
                    Code.UNSUPPORTED_MEDIA_TYPE,
                    _("The body must be sent as application/json."),
                    content_type=JSON_TYPE,
                )
            try:
                response = view(request, *args, **kwargs)
            except DomainError as error:
                return error_response(error)
            response["Cache-Control"] = "private, no-store"
            return response

        checked = _csrf_check(guarded)

        @csrf_exempt  # the global middleware steps aside: `checked` runs the same check
        @wraps(view)
        def entry(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if request.method != method:
                response = error_response(
                    MethodNotAllowed(_("Use %(methods)s.") % {"methods": method})
                )
                response["Allow"] = method
                return response
            try:
                return checked(request, *args, **kwargs)
            except RequestDataTooBig:
                return transport_error(Code.PAYLOAD_TOO_LARGE, _("The body is too large."))
            except DATABASE_UNAVAILABLE as error:
                # Also when the session or the user could not be read: JSON, never a 500 page.
                return database_unavailable(error, api="desk API")
            except (BadRequest, MultiPartParserError) as error:
                # Django refused to read the body (a charset it does not know, a multipart
                # body without its boundary, read by the CSRF check): JSON, like every answer
                # of this API, and the client's error, not ours.
                return error_response(ValidationFailed(str(error), code="invalid_value"))
            except Exception:
                # The last resort: the door's page shows "not recorded" for any 5xx.
                logger.exception("desk API: unexpected error (%s)", request.path)
                return transport_error(Code.SERVER_ERROR, _("Something went wrong on our side."))

        return entry

    return decorate


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = inputs.load_json(request.body)
    except ValueError:  # not JSON, not UTF-8, or nested deeper than inputs.MAX_JSON_DEPTH
        raise ValidationFailed(_("The body must be a JSON object."), code="invalid_value") from None
    if not isinstance(body, dict):
        raise ValidationFailed(_("The body must be a JSON object."), code="invalid_value")
    return body


# Primary keys are bigint: a larger number names nothing and must not reach the database.
ID_MAX = 2**63 - 1


def _id(value: Any, field: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    number = inputs.json_int(value)
    if number is None or not 1 <= number <= ID_MAX:
        raise ValidationFailed(
            _("%(field)s must be a positive integer id.") % {"field": field}, code="invalid_value"
        )
    return number


def _nonce(body: dict[str, Any]) -> str | None:
    """The optional `nonce`: absent is None; present, it must be a valid one (null included)."""
    return check_nonce(body["nonce"]) if "nonce" in body else None


def _actor(request: HttpRequest):
    return request.user  # the service turns a user into the desk actor (type "desk")


# --- pages -------------------------------------------------------------------------------------


@desk_page
def index(request: HttpRequest) -> HttpResponse:
    rows = selectors.desk_events(now=timezone.now())
    return render(request, "desk/index.html", {"rows": rows})


def _page_texts() -> dict[str, str]:
    """The scanner script's words added with the payment flag and the slot check, translated
    here (the script reads them from the page: no inline script under the CSP)."""
    return {
        "to_pay_badge": gettext("To pay"),
        "to_pay": gettext("Not paid yet: collect the payment, or send to the cash desk."),
        "paid": gettext("Paid"),
        "payment": gettext("Payment"),
        "other_slot": gettext("Ticket for another slot — check before admitting"),
        # Offline mode: %(…)s are filled in by the script.
        "offline_badge": gettext("Offline"),
        "offline_decided": gettext(
            "Decided offline from the door list of %(time)s. It will be sent when the "
            "network is back."
        ),
        "offline_manual": gettext("Offline: confirm a ticket by hand once the network is back."),
        "net_online": gettext("Online"),
        "net_offline": gettext("Offline — scans are decided from the door list"),
        "net_sending": gettext("Back online — sending the waiting scans…"),
        "list_fresh": gettext("Door list updated just now"),
        "list_age": gettext("Door list %(minutes)s min old"),
        "list_none": gettext("No door list yet: without the network a scan cannot be decided"),
        "queued": gettext("Waiting to send"),
        "conflicts": gettext("Admitted twice — reported to the organisers"),
        "conflict": gettext(
            "%(name)s was admitted offline here, but the server had already recorded: "
            "%(status)s. Reported to the organisers."
        ),
        "replay_refused": gettext(
            "A waiting scan (%(barcode)s) was refused by the server: %(why)s"
        ),
        # The answers' titles (words, icon and tone: never the colour alone).
        "status_confirmed_registration": gettext("Checked in — welcome"),
        "status_already_registered": gettext(
            "Already registered — this ticket was already scanned"
        ),
        "status_need_manual_confirmation": gettext(
            "Ticket for another event — check before admitting"
        ),
        "status_canceled_registration": gettext("Cancelled ticket — do not admit"),
        "status_unconfirmed_registration": gettext("Unconfirmed registration — do not admit"),
        "status_not_ongoing_event": gettext("Event is over or cancelled — do not admit"),
        "status_invalid_ticket": gettext("Unknown ticket — do not admit"),
        "status_not_recorded": gettext("Not recorded — scan again"),
        "status_conflict": gettext("Admitted twice"),
        "status_refused": gettext("Not recorded — the server refused the request"),
        "status_pending": gettext("Checking…"),
        "status_idle": gettext("Ready — scan a ticket"),
        "fact_ticket": gettext("Ticket"),
        "fact_slot": gettext("Slot"),
        "fact_company": gettext("Company"),
        "fact_event": gettext("Event"),
        "fact_checked_in": gettext("Checked in"),
        "checked_in_today": gettext("today, %(time)s"),
        "barcode": gettext("Barcode %(barcode)s"),
        "not_checked": gettext("Barcode %(barcode)s was not checked. Scan it again."),
        "scan_again": gettext("Scan it again."),
        "session_expired": gettext("Log in again if your session expired."),
        "confirming": gettext("Confirming entry…"),
    }


def _chosen_slot(request: HttpRequest, slots: list) -> Any:
    """The slot the page admits for (`?slot=<id>`, one of `slots`), or None for any slot."""
    raw = request.GET.get("slot", "")
    if raw == "":
        return None
    slot_id = inputs.as_id(raw)
    chosen = next((slot for slot in slots if slot.pk == slot_id), None)
    if chosen is None:
        raise Http404("No such slot of this event.")
    return chosen


@desk_page
@ensure_csrf_cookie
def scanner(request: HttpRequest, event_id: int) -> HttpResponse:
    event = selectors.desk_event(event_id=event_id)
    if event is None:
        raise Http404("No such event.")
    now = timezone.now()
    slots = selectors.desk_slots(event=event)
    slot = _chosen_slot(request, slots)
    return render(
        request,
        "desk/scanner.html",
        {
            "event": event,
            "slots": slots,
            "slot": slot,
            "counters": selectors.counters(event=event, slot_id=slot.pk if slot else None),
            "ongoing": core_rules.is_ongoing(event, now=now),
            "not_ongoing": selectors.is_not_ongoing(event, now=now),
            "texts": _page_texts(),
        },
    )


# --- JSON --------------------------------------------------------------------------------------


@api.operation(
    "post",
    operation_id="deskScan",
    summary="Scan a barcode at the door (the frozen branch order of the desk)",
    tags=["Desk"],
    security=SESSION,
    body=json_body(ref("DeskScan")),
    responses={200: json_answer("The scan's answer.", ref("DeskAnswer"))},
    errors=(
        *GUARD_ERRORS,
        "csrf_failed",
        "invalid_value",
        "invalid_slot",
        "nonce_reused",
        *TRANSPORT_ERRORS,
    ),
)
@desk_api(method="POST")
def api_scan(request: HttpRequest) -> JsonResponse:
    body = _body(request)
    barcode = body.get("barcode")
    if not isinstance(barcode, str):
        raise ValidationFailed(_("barcode must be a string."), code="invalid_value")
    event_id = _id(body.get("event_id"), "event_id", optional=True)
    slot_id = _id(body.get("slot_id"), "slot_id", optional=True)
    replay = _replay(body, event_id=event_id, now=timezone.now())
    return JsonResponse(
        register_attendee(
            barcode=barcode,
            event_id=event_id,
            slot_id=slot_id,
            actor=_actor(request),
            nonce=_nonce(body),
            replay=replay,
        )
    )


def _replay(body: dict[str, Any], *, event_id: int | None, now) -> Replay | None:
    """The fields of a scan sent after it was made (a door's queue): `scanned_at` (ISO 8601
    with its offset, not in the future beyond offline.SCAN_MAX_SKEW, not older than
    offline.SCAN_MAX_AGE), `offline` (boolean; true needs `scanned_at` and the `snapshot` the
    door decided from, signed by this server for this event) and `offline_status` (what the
    door showed). None for a scan sent as it is made. A `nonce` is not read here."""
    raw_at, is_offline = body.get("scanned_at"), body.get("offline")
    shown, signature = body.get("offline_status"), body.get("snapshot")
    if is_offline is not None and not isinstance(is_offline, bool):
        raise ValidationFailed(_("offline must be a boolean."), code="invalid_value")
    if raw_at is None:
        if is_offline or shown is not None or signature is not None:
            raise ValidationFailed(_("An offline scan needs its scanned_at."), code="invalid_value")
        return None
    scanned_at = _aware_time(raw_at)
    if scanned_at is None:
        raise ValidationFailed(
            _("scanned_at must be an ISO 8601 time with its offset."), code="invalid_value"
        )
    if scanned_at > now + offline.SCAN_MAX_SKEW or scanned_at < now - offline.SCAN_MAX_AGE:
        raise ValidationFailed(
            _("scanned_at must be within the last 24 hours, not in the future."),
            code="invalid_value",
        )
    if not is_offline:
        if shown is not None or signature is not None:
            raise ValidationFailed(
                _("offline_status and snapshot go with offline: true."), code="invalid_value"
            )
        return Replay(scanned_at=scanned_at)
    if shown not in {s.value for s in ScanStatus}:
        raise ValidationFailed(_("offline_status must name a scan answer."), code="invalid_value")
    snapshot_at = (
        offline.snapshot_time(signature=signature, event_id=event_id)
        if isinstance(signature, str)
        else None
    )
    if snapshot_at is None:
        raise ValidationFailed(
            _("snapshot must be the signature of this event's desk list, as served."),
            code="invalid_value",
        )
    return Replay(
        scanned_at=scanned_at, offline=True, offline_status=shown, snapshot_at=snapshot_at
    )


def _aware_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None and parsed.utcoffset() is not None else None


@api.operation(
    "post",
    operation_id="deskConfirm",
    summary="Admit a registration by hand (after `need_manual_confirmation`)",
    tags=["Desk"],
    security=SESSION,
    body=json_body(ref("DeskConfirm")),
    responses={200: json_answer("The confirmation's answer.", ref("DeskAnswer"))},
    errors=(
        *GUARD_ERRORS,
        "csrf_failed",
        "invalid_value",
        "not_found",
        "nonce_reused",
        *TRANSPORT_ERRORS,
    ),
)
@desk_api(method="POST")
def api_confirm(request: HttpRequest) -> JsonResponse:
    body = _body(request)
    registration_id = _id(body.get("registration_id"), "registration_id")
    return JsonResponse(
        confirm_attendance(
            registration_id=registration_id, actor=_actor(request), nonce=_nonce(body)
        )
    )


@api.operation(
    "get",
    operation_id="deskCounters",
    summary="Attended / expected, for the event or one of its slots",
    tags=["Desk"],
    security=SESSION,
    path_parameters={"event_id": "An active event."},
    query=(
        {
            "name": "slot_id",
            "required": False,
            "description": "A slot of the event: its own counters.",
            "schema": {"anyOf": [ID_TEXT, {"const": ""}]},
        },
    ),
    responses={200: json_answer("The counters.", ref("DeskCounters"))},
    errors=(*GUARD_ERRORS, "not_found", "invalid_slot"),
)
@desk_api(method="GET")
def api_counters(request: HttpRequest, event_id: int) -> JsonResponse:
    """The event's counters, or one slot's (`?slot_id=<id>`, a slot of the event)."""
    event = selectors.desk_event(event_id=event_id)
    if event is None:
        raise NotFound(_("Event %(id)s does not exist.") % {"id": event_id})
    slot_id = None
    raw = request.GET.get("slot_id", "")
    if raw != "":
        slot_id = inputs.as_id(raw)
        if slot_id is None or selectors.slot_event_id(slot_id=slot_id) != event.pk:
            raise ValidationFailed(
                _("slot_id must name a slot of this event."),
                code=Code.INVALID_SLOT,
                field="slot_id",
            )
    body: dict[str, Any] = {"event_id": event.pk}
    if slot_id is not None:
        body["slot_id"] = slot_id
    return JsonResponse({**body, **selectors.counters(event=event, slot_id=slot_id)})


@api.operation(
    "get",
    operation_id="deskSnapshot",
    summary="The event's signed desk list, for deciding at the door while offline",
    tags=["Desk"],
    security=SESSION,
    path_parameters={"event_id": "An active event."},
    responses={200: json_answer("The snapshot (never cached).", ref("DeskSnapshot"))},
    errors=(*GUARD_ERRORS, "not_found"),
)
@desk_api(method="GET")
def api_snapshot(request: HttpRequest, event_id: int) -> JsonResponse:
    """Every registration of the event, keyed by a hash of its barcode, with what the door
    shows; the event's closing facts; the time and the signature (desk.services.offline)."""
    event = selectors.desk_event(event_id=event_id)
    if event is None:
        raise NotFound(_("Event %(id)s does not exist.") % {"id": event_id})
    return JsonResponse(offline.snapshot(event=event, now=timezone.now()))


@csrf_exempt  # nothing to protect: it answers 404 to every method, signed in or not
def api_unknown(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any other path under /desk/api/: a JSON 404, as every answer of this API."""
    return error_response(NotFound(_("No such desk API route.")))
