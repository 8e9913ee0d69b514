"""The booths overlay's error codes (interfaces.md) and their HTTP statuses."""

from events.errors import DomainError, ErrorCode, register_codes


@register_codes
class BoothCode(ErrorCode):
    BOOTH_UNAVAILABLE = "booth_unavailable", 409
    BOOTH_LOCKED = "booth_locked", 409


class BoothUnavailable(DomainError):
    code = BoothCode.BOOTH_UNAVAILABLE


class BoothLocked(DomainError):
    code = BoothCode.BOOTH_LOCKED
