"""The pinned verbs of the attendance desk (interfaces.md `desk.services`)."""

from desk.services.attendance import ScanStatus, confirm_attendance, decide, register_attendee

__all__ = ["ScanStatus", "confirm_attendance", "decide", "register_attendee"]
