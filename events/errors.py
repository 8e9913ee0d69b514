"""One typed error hierarchy with stable codes (interfaces.md, "Error codes").

Each code is a member of an `ErrorCode` enum that carries its HTTP status, so the status map is
derived, never kept by hand. Core declares `Code`; each overlay declares its own enum in its own
`errors.py` with `@register_codes` (imported by its `AppConfig.ready()`). Views answer
`http_status(error.code)`; tests assert `.code`, never message text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar


class ErrorCode(StrEnum):
    """A stable error code and the HTTP status it answers with."""

    http_status: int

    def __new__(cls, value: str, http_status: int) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.http_status = http_status
        return member


_registry: dict[str, ErrorCode] = {}

E = TypeVar("E", bound=type[ErrorCode])


def register_codes(enum: E) -> E:
    """Add an app's codes to the one registry; a code may be declared by one app only."""
    for member in enum:
        owner = _registry.get(member.value)
        if owner is not None and type(owner) is not enum:
            raise ValueError(f"error code {member.value!r} is declared twice")
        _registry[member.value] = member
    return enum


def registered_code(code: str) -> ErrorCode | None:
    """The registered member of `code` (its enum names the app), or None."""
    return _registry.get(code)


def http_status(code: str) -> int:
    """The HTTP status of a registered code (an unknown code is a programming error: 500)."""
    member = _registry.get(code)
    return member.http_status if member is not None else 500


@register_codes
class Code(ErrorCode):
    """The core's codes. The overlays' (seams, booths, leads) are declared in their apps."""

    SOLD_OUT = "sold_out", 409
    REGISTRATIONS_CLOSED = "registrations_closed", 409
    TICKET_REQUIRED = "ticket_required", 400
    INVALID_TICKET = "invalid_ticket", 400
    SLOT_REQUIRED = "slot_required", 400
    INVALID_SLOT = "invalid_slot", 400
    SALE_NOT_STARTED = "sale_not_started", 409
    SALE_ENDED = "sale_ended", 409
    PRICED_TICKET = "priced_ticket", 409
    INVALID_QUANTITY = "invalid_quantity", 400
    INVALID_ATTENDEE = "invalid_attendee", 400
    QUESTION_REQUIRED = "question_required", 400
    INVALID_ANSWER = "invalid_answer", 400
    INVALID_TRANSITION = "invalid_transition", 409
    ARCHIVE_REFUSED = "archive_refused", 409
    RATE_LIMITED = "rate_limited", 429
    NOT_FOUND = "not_found", 404
    CAPABILITY_REFUSED = "capability_refused", 404
    SECRET_MISSING = "secret_missing", 503
    PORT_NOT_WIRED = "port_not_wired", 503
    TEMPLATE_MISSING = "template_missing", 409
    INVALID_VALUE = "invalid_value", 400
    # Self-service cancellation (docs/spec.md "Self-service cancellation"): why an
    # attendee's own cancellation is refused (a bad or revoked link is `capability_refused`).
    ALREADY_CANCELLED = "already_cancelled", 409
    EVENT_CANCELLED = "event_cancelled", 409
    EVENT_STARTED = "event_started", 409
    REGISTRATION_SOLD = "registration_sold", 409
    CANCEL_DEADLINE_PASSED = "cancel_deadline_passed", 409
    # Waiting list (docs/spec.md "Waiting list"): a join refused because a seat of
    # the pair can be had now (register instead).
    SEATS_AVAILABLE = "seats_available", 409
    # Transport-level answers of the JSON API (docs/spec.md register): not domain refusals, but
    # they answer in the same pinned error shape.
    SERVICE_UNAVAILABLE = "service_unavailable", 503
    METHOD_NOT_ALLOWED = "method_not_allowed", 405
    PAYLOAD_TOO_LARGE = "payload_too_large", 413
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type", 415
    SERVER_ERROR = "server_error", 500
    # The client did not finish sending its body: the read timed out, or the connection broke
    # (config/request_body.py).
    REQUEST_TIMEOUT = "request_timeout", 408
    BODY_UNREADABLE = "body_unreadable", 400
    # A signed-in user lacking the permission a staff verb needs (the desk's check-in, the
    # attendee export).
    FORBIDDEN = "forbidden", 403


class DomainError(Exception):
    code: str = Code.INVALID_VALUE

    def __init__(self, message: str = "", *, code: str | None = None, **details: Any) -> None:
        if code is not None:
            self.code = code
        self.message = message or self.code.replace("_", " ")
        self.details = details
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class SeatsUnavailable(DomainError):
    code = Code.SOLD_OUT


class RegistrationsClosed(DomainError):
    code = Code.REGISTRATIONS_CLOSED


class InvalidTransition(DomainError):
    code = Code.INVALID_TRANSITION


class ArchiveRefused(DomainError):
    code = Code.ARCHIVE_REFUSED


class ValidationFailed(DomainError):
    """A refusal of input; `code` is one of the input codes (ticket_required, invalid_slot, …)."""

    code = Code.INVALID_VALUE


class RateLimited(DomainError):
    code = Code.RATE_LIMITED


class NotFound(DomainError):
    code = Code.NOT_FOUND


class CapabilityRefused(DomainError):
    code = Code.CAPABILITY_REFUSED


class SecretMissing(DomainError):
    code = Code.SECRET_MISSING


class PortNotWired(DomainError):
    code = Code.PORT_NOT_WIRED


class TemplateMissing(DomainError):
    code = Code.TEMPLATE_MISSING


class CancellationRefused(DomainError):
    """An attendee may not cancel this registration themselves; `code` says why (one of the
    self-service codes: already_cancelled, event_cancelled, event_started, registration_sold,
    cancel_deadline_passed)."""

    code = Code.CANCEL_DEADLINE_PASSED


class Forbidden(DomainError):
    code = Code.FORBIDDEN


class SeatsAvailable(DomainError):
    """A waiting-list join refused: the ticket / slot asked for is not sold out."""

    code = Code.SEATS_AVAILABLE
