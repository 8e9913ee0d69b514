"""The desk's error codes (interfaces.md "Error codes"; the desk adds a transport answer).

The scan itself never raises for a ticket problem: every branch of spec-overlay.md §5.1 is an
answer (`status`). These codes answer the requests that never reach the verb; `forbidden` is
core's (the attendee export refuses with it too). `nonce_reused` is 409, like every refusal this
codebase decides on stored state (`sold_out`, `already_cancelled`): the request is well formed
and schema-valid, what refuses it is the row its nonce already holds (another request's first
answer). Not 422 (the IETF Idempotency-Key draft's choice): here 4xx other than 409 means the
request itself is wrong, and the API description's positive-data check holds the API to that.
"""

from __future__ import annotations

from events.errors import Code, DomainError, ErrorCode, Forbidden, register_codes

__all__ = ["CsrfFailed", "DeskCode", "Forbidden", "MethodNotAllowed", "NonceReused"]


@register_codes
class DeskCode(ErrorCode):
    CSRF_FAILED = "csrf_failed", 403
    NONCE_REUSED = "nonce_reused", 409


class CsrfFailed(DomainError):
    code = DeskCode.CSRF_FAILED


class NonceReused(DomainError):
    """The nonce of a scan or confirmation already answered another request of this user."""

    code = DeskCode.NONCE_REUSED


class MethodNotAllowed(DomainError):
    """The core's transport code: the JSON APIs answer a wrong method alike."""

    code = Code.METHOD_NOT_ALLOWED
