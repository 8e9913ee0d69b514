"""The JSON API of the attendee surface: intake (spec.md §7.4, interfaces.md "Intake JSON").

CSRF-exempt (no cookie authority: anyone may register, the funnel guards it). Errors are
`{"error": {"code", "message", …details}}` with the status of `errors.http_status`.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from events.client import client_address
from events.errors import DomainError, RateLimited, http_status
from events.services import intake


def error_response(error: DomainError) -> JsonResponse:
    response = JsonResponse(error.as_dict(), status=http_status(error.code))
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.details["retry_after"])
    return response


def _json_body(request: HttpRequest):
    """The parsed body, or None when it is not JSON: the service then refuses it with
    `invalid_value`, after its 404 and rate-limit checks (the funnel's order holds)."""
    try:
        return json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return None


@csrf_exempt
@require_POST
def intake_registrations(request: HttpRequest, event_id: int) -> JsonResponse:
    try:
        result = intake.submit(
            event_id=event_id,
            payload=_json_body(request),
            client=client_address(request),
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
    except DomainError as error:
        return error_response(error)
    # Sorted keys: a replay (read back from jsonb, which reorders keys) is byte-identical.
    response = JsonResponse(
        result.body, status=result.status, json_dumps_params={"sort_keys": True}
    )
    if result.replayed:
        response["Idempotent-Replayed"] = "true"
    response["Cache-Control"] = "private, no-store"
    return response
