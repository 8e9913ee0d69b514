"""One typed error hierarchy with stable codes (interfaces.md, "Error codes").

Views map `code` to an HTTP status in one place (`HTTP_STATUS`); tests assert `.code`.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code: str = "invalid_value"

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
    code = "sold_out"


class RegistrationsClosed(DomainError):
    code = "registrations_closed"


class InvalidTransition(DomainError):
    code = "invalid_transition"


class ArchiveRefused(DomainError):
    code = "archive_refused"


class ValidationFailed(DomainError):
    """A refusal of input; `code` is one of the input codes (ticket_required, invalid_slot, …)."""

    code = "invalid_value"


class RateLimited(DomainError):
    code = "rate_limited"


class NotFound(DomainError):
    code = "not_found"


class CapabilityRefused(DomainError):
    code = "capability_refused"


class SecretMissing(DomainError):
    code = "secret_missing"


class PortNotWired(DomainError):
    code = "port_not_wired"


class TemplateMissing(DomainError):
    code = "template_missing"


CODES = (
    "sold_out",
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
    "invalid_transition",
    "archive_refused",
    "rate_limited",
    "not_found",
    "capability_refused",
    "secret_missing",
    "port_not_wired",
    "template_missing",
    "invalid_signature",
    "stale_timestamp",
    "malformed_message",
    "unknown_reference",
    "booth_unavailable",
    "booth_locked",
    "invalid_predicate",
    "invalid_value",
)

HTTP_STATUS = {
    "sold_out": 409,
    "registrations_closed": 409,
    "ticket_required": 400,
    "invalid_ticket": 400,
    "slot_required": 400,
    "invalid_slot": 400,
    "sale_not_started": 409,
    "sale_ended": 409,
    "priced_ticket": 409,
    "invalid_quantity": 400,
    "invalid_attendee": 400,
    "question_required": 400,
    "invalid_answer": 400,
    "invalid_transition": 409,
    "archive_refused": 409,
    "rate_limited": 429,
    "not_found": 404,
    "capability_refused": 404,
    "secret_missing": 503,
    "port_not_wired": 503,
    "template_missing": 409,
    "invalid_signature": 401,
    "stale_timestamp": 401,
    "malformed_message": 400,
    "unknown_reference": 409,
    "booth_unavailable": 409,
    "booth_locked": 409,
    "invalid_predicate": 400,
    "invalid_value": 400,
}
