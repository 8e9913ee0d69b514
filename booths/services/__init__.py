"""The booths overlay's write verbs (interfaces.md pins the first six)."""

from booths.services.bookings import (
    OrderBooths,
    OrderRelease,
    block_booth,
    cancel_booking,
    confirm_booking,
    confirm_order_booths,
    mark_order_booths_paid,
    release_booking,
    release_booth,
    release_order_booths,
    request_booking,
)
from booths.services.booths import apply_type_booths, create_booth, delete_booth, update_booth

__all__ = [
    "OrderBooths",
    "OrderRelease",
    "apply_type_booths",
    "block_booth",
    "cancel_booking",
    "confirm_booking",
    "confirm_order_booths",
    "create_booth",
    "delete_booth",
    "mark_order_booths_paid",
    "release_booking",
    "release_booth",
    "release_order_booths",
    "request_booking",
    "update_booth",
]
