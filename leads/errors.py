"""The leads overlay's error codes (interfaces.md) and their HTTP statuses."""

from events.errors import DomainError, ErrorCode, register_codes


@register_codes
class LeadCode(ErrorCode):
    INVALID_PREDICATE = "invalid_predicate", 400


class InvalidPredicate(DomainError):
    code = LeadCode.INVALID_PREDICATE
