"""The JSON API of the attendee surface: intake (spec.md §7.4, interfaces.md "Intake JSON").

CSRF-exempt (no cookie authority: anyone may register, the funnel guards it) — which is why a
body must be declared `application/json`: a cross-site form or `text/plain` fetch cannot send
that without a CORS preflight this API never grants, so no page can make its visitors' browsers
register people (415 otherwise).

Every answer of this view is JSON. Errors are `{"error": {"code", "message", …details}}` with
the status of `errors.http_status`: domain refusals, and the transport answers of docs/spec.md's
register — 413 `payload_too_large` (DATA_UPLOAD_MAX_MEMORY_SIZE), 405 `method_not_allowed`, 415
`unsupported_media_type`, 503 `service_unavailable` + `Retry-After` (the rate limiter's Redis
did not answer: nothing was decided, so a retry is safe; or the database connection failed, see
`database_unavailable`), and 500 `server_error` for anything unexpected (logged with its
traceback; the message says nothing of the cause).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, JsonResponse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt

from events import api_schemas, i18n, inputs, ratelimit
from events.client import client_address
from events.errors import Code, DomainError, RateLimited, http_status
from events.openapi import api, json_answer, json_body, ref
from events.services import intake

logger = logging.getLogger("events.api")

JSON_TYPE = "application/json"
# Seconds a client should wait before retrying when Redis (the limiter) or the database is
# unavailable.
RETRY_AFTER_UNAVAILABLE = 5


def error_response(error: DomainError) -> JsonResponse:
    response = JsonResponse(error.as_dict(), status=http_status(error.code))
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.details["retry_after"])
    return response


def transport_error(code: Code, message: str, **details) -> JsonResponse:
    """A transport-level answer in the pinned error shape (status from the code)."""
    body = {"error": {"code": code.value, "message": message, **details}}
    response = JsonResponse(body, status=code.http_status)
    response["Cache-Control"] = "private, no-store"
    return response


# DB-API's errors of the database's operation, not of the request: the connection failed or
# was lost (a terminated backend, a failover, a restart; also a deadlock or timeout victim).
# The transaction rolled back; a lost connection is dropped at the end of the request.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def database_unavailable(error: Exception, *, api: str) -> JsonResponse:
    """503 `service_unavailable` + `Retry-After` for a database fault, on every JSON API (the
    intake, the sale seam, the desk). The retry is safe where it counts once: the intake's
    Idempotency-Key, the seam's message id, a scan of an attended registration (even when the
    connection dropped at COMMIT and the write did land)."""
    # One log line: libpq's messages span several.
    logger.error("%s: database unavailable (%s): answering 503", api, " ".join(str(error).split()))
    response = transport_error(
        Code.SERVICE_UNAVAILABLE, _("The service is temporarily unavailable; try again soon.")
    )
    response["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE)
    return response


class _NotJson:
    """The body does not parse as JSON (the service refuses it with `invalid_value`)."""


def _json_body(request: HttpRequest):
    """The parsed body, or a value the service refuses with `invalid_value` (after its 404 and
    rate-limit checks: the funnel's order holds). Nesting deeper than inputs.MAX_JSON_DEPTH is
    refused the same way, never a 500."""
    try:
        return inputs.load_json(request.body)
    except ValueError:  # UnicodeDecodeError included
        return _NotJson()


def json_methods(*methods: str):
    """A JSON route's method gate: another method answers 405 `method_not_allowed` in the
    pinned JSON shape, with `Allow`. CSRF-exempt, so that the CSRF check (which refuses any
    unsafe method first, as an HTML 403) does not answer before it: these routes take no
    cookie authority (reads, and the seam's own signatures)."""

    def decorate(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
        @csrf_exempt
        @functools.wraps(view)
        def gated(request: HttpRequest, *args, **kwargs):
            if request.method not in methods:
                response = transport_error(
                    Code.METHOD_NOT_ALLOWED,
                    _("Use %(methods)s.") % {"methods": " / ".join(methods)},
                )
                response["Allow"] = ", ".join(methods)
                return response
            return view(request, *args, **kwargs)

        return gated

    return decorate


# The answers of `json_post`'s envelope (and of config.request_body, before it), by code.
TRANSPORT_ERRORS = (
    "payload_too_large",
    "unsupported_media_type",
    "service_unavailable",
    "server_error",
    "body_unreadable",
    "request_timeout",
)
PUBLIC_TAG = "Attendees"
api.register_tag(PUBLIC_TAG, "The public intake and waiting list (no authentication).")
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "required": False,
    "description": "Makes a retried POST answer the first answer (201, `Idempotent-Replayed: "
    "true`) instead of registering again; the same key with another body is `invalid_value`.",
    "schema": api_schemas.one_line(intake.MAX_KEY_LENGTH),
}


def json_post(*, api: str, limiter_message: str):
    """The envelope of a public JSON POST route (`view(request, event_id)`), every answer JSON:
    405 for another method ("Use POST."), 415 unless the body is declared JSON, 413
    when it is too large, 503 + `Retry-After` when the rate limiter's Redis or the database
    does not answer (`limiter_message`; `api` names the route in the log), 500
    `server_error` (logged) for anything unexpected. CSRF-exempt: see the module docstring."""

    def decorate(handler: Callable[[HttpRequest, int], JsonResponse]):
        @csrf_exempt
        @functools.wraps(handler)
        def view(request: HttpRequest, event_id: int) -> JsonResponse:
            if request.method != "POST":
                response = transport_error(Code.METHOD_NOT_ALLOWED, _("Use POST."))
                response["Allow"] = "POST"
                return response
            if request.content_type != JSON_TYPE:
                return transport_error(
                    Code.UNSUPPORTED_MEDIA_TYPE,
                    _("The body must be sent as application/json."),
                    content_type=JSON_TYPE,
                )
            try:
                return handler(request, event_id)
            except RequestDataTooBig:
                return transport_error(Code.PAYLOAD_TOO_LARGE, _("The body is too large."))
            except DomainError as error:
                return error_response(error)
            except ratelimit.LimiterUnavailable as error:
                logger.error("%s: rate limiter unavailable (%s): answering 503", api, error)
                response = transport_error(Code.SERVICE_UNAVAILABLE, str(limiter_message))
                response["Retry-After"] = str(RETRY_AFTER_UNAVAILABLE)
                return response
            except DATABASE_UNAVAILABLE as error:
                return database_unavailable(error, api=f"{api} (event {event_id})")
            except Exception:
                # The last resort: these APIs answer JSON even for their own faults.
                logger.exception("%s: unexpected error (event %s)", api, event_id)
                return transport_error(Code.SERVER_ERROR, _("Something went wrong on our side."))

        return view

    return decorate


@api.operation(
    "post",
    operation_id="registerAttendees",
    summary="Register attendees (the public intake)",
    description="The checks of the guarded funnel run in order and the first failure answers; "
    "nothing is written on a refusal. Rate limited per client address (429 with "
    "`Retry-After`).",
    tags=[PUBLIC_TAG],
    path_parameters={"event_id": "A published event."},
    headers=[IDEMPOTENCY_KEY],
    body=json_body(ref("IntakeRequest")),
    responses={
        201: json_answer(
            "Registered: per attendee its registration, barcode and links.",
            ref("IntakeCreated"),
            headers={"Cache-Control": True, "Idempotent-Replayed": False},
        )
    },
    errors=(
        "invalid_value",
        "not_found",
        "rate_limited",
        "registrations_closed",
        "ticket_required",
        "invalid_ticket",
        "slot_required",
        "invalid_slot",
        "sale_not_started",
        "sale_ended",
        "priced_ticket",
        "invalid_quantity",
        "invalid_attendee",
        "question_required",
        "invalid_answer",
        "sold_out",
        *TRANSPORT_ERRORS,
    ),
)
@json_post(
    api="intake API",
    limiter_message=gettext_lazy("Registration is temporarily unavailable; try again soon."),
)
def intake_registrations(request: HttpRequest, event_id: int) -> JsonResponse:
    payload = _json_body(request)
    # The body's `lang` (when it is one of the product's) is the language of the answer's
    # messages too; the request's otherwise.
    lang = i18n.supported(payload.get("lang")) if isinstance(payload, dict) else None
    with translation.override(lang or translation.get_language()):
        result = intake.submit(
            event_id=event_id,
            payload=payload,
            client=client_address(request),
            idempotency_key=request.headers.get("Idempotency-Key"),
            language=getattr(request, "expressed_language", None),
        )
    # Sorted keys: a replay (read back from jsonb, which reorders keys) is byte-identical.
    response = JsonResponse(
        result.body, status=result.status, json_dumps_params={"sort_keys": True}
    )
    if result.replayed:
        response["Idempotent-Replayed"] = "true"
    response["Cache-Control"] = "private, no-store"
    return response
