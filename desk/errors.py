"""The desk's error codes (interfaces.md "Error codes"; the desk adds a transport answer).

The scan itself never raises for a ticket problem: every branch of spec-overlay.md §5.1 is an
answer (`status`). These codes answer the requests that never reach the verb; `forbidden` is
core's (the attendee export refuses with it too).
"""

from __future__ import annotations

from events.errors import Code, DomainError, ErrorCode, Forbidden, register_codes

__all__ = ["CsrfFailed", "DeskCode", "Forbidden", "MethodNotAllowed"]


@register_codes
class DeskCode(ErrorCode):
    CSRF_FAILED = "csrf_failed", 403


class CsrfFailed(DomainError):
    code = DeskCode.CSRF_FAILED


class MethodNotAllowed(DomainError):
    """The core's transport code: the JSON APIs answer a wrong method alike."""

    code = Code.METHOD_NOT_ALLOWED
