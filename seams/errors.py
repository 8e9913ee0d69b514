"""The sale seam's error codes (interfaces.md) and their HTTP statuses."""

from events.errors import DomainError, ErrorCode, register_codes


@register_codes
class SeamCode(ErrorCode):
    INVALID_SIGNATURE = "invalid_signature", 401
    STALE_TIMESTAMP = "stale_timestamp", 401
    MALFORMED_MESSAGE = "malformed_message", 400
    UNKNOWN_REFERENCE = "unknown_reference", 409


class InvalidSignature(DomainError):
    code = SeamCode.INVALID_SIGNATURE


class StaleTimestamp(DomainError):
    code = SeamCode.STALE_TIMESTAMP


class MalformedMessage(DomainError):
    code = SeamCode.MALFORMED_MESSAGE


class UnknownReference(DomainError):
    code = SeamCode.UNKNOWN_REFERENCE
