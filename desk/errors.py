"""The desk's error codes (interfaces.md "Error codes"; the desk adds two transport answers).

The scan itself never raises for a ticket problem: every branch of spec-overlay.md §5.1 is an
answer (`status`). These codes answer the requests that never reach the verb.
"""

from __future__ import annotations

from events.errors import Code, DomainError, ErrorCode, register_codes


@register_codes
class DeskCode(ErrorCode):
    FORBIDDEN = "forbidden", 403
    CSRF_FAILED = "csrf_failed", 403


class Forbidden(DomainError):
    code = DeskCode.FORBIDDEN


class CsrfFailed(DomainError):
    code = DeskCode.CSRF_FAILED


class MethodNotAllowed(DomainError):
    """The core's transport code: the JSON APIs answer a wrong method alike."""

    code = Code.METHOD_NOT_ALLOWED
