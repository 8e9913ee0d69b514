"""Reads of the booths overlay shared by the admin, the seam and the demo: querysets come with
their joins set, and counts for many events take one grouped query."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from booths.models import BookingState, Booth, BoothBooking, BoothState


@dataclass(frozen=True)
class BoothCounts:
    total: int = 0
    available: int = 0

    def __str__(self) -> str:
        return f"{self.available} / {self.total}" if self.total else "—"


def booth_counts(*, event_ids: Iterable[int]) -> dict[int, BoothCounts]:
    """Total and available booths per event, for any number of events in one query (events
    without booths get zeros)."""
    ids = list(set(event_ids))
    counts = {pk: BoothCounts() for pk in ids}
    if not ids:
        return counts
    rows = (
        Booth.objects.filter(event_id__in=ids)
        .order_by()
        .values("event_id")
        .annotate(total=Count("pk"), available=Count("pk", filter=Q(state=BoothState.AVAILABLE)))
    )
    for row in rows:
        counts[row["event_id"]] = BoothCounts(total=row["total"], available=row["available"])
    return counts


def event_booths(*, event_id: int) -> QuerySet[Booth]:
    return Booth.objects.filter(event_id=event_id).select_related("booth_category")


def catalog_booths(*, event_id: int) -> QuerySet[Booth]:
    """The booths a host may sell for one event, with their category (one query)."""
    return Booth.objects.filter(event_id=event_id).select_related("booth_category").order_by("pk")


def booth_list() -> QuerySet[Booth]:
    """The staff list of booths: event and category joined."""
    return Booth.objects.select_related("event", "booth_category")


def booking_list() -> QuerySet[BoothBooking]:
    return BoothBooking.objects.select_related("booth", "booth__event")


def order_bookings(*, order_ref: str) -> QuerySet[BoothBooking]:
    """An order's bookings, live ones first (the seam's and the admin's view of an order)."""
    return booking_list().filter(order_ref=order_ref).order_by("booth_id", "pk")


def order_booths(*, order_ref: str) -> QuerySet[Booth]:
    """The booths an order holds (a confirmed booking of that order)."""
    return booth_list().filter(
        bookings__order_ref=order_ref, bookings__state=BookingState.CONFIRMED
    )


def missing_booths(*, booth_ids: Iterable[int]) -> list[int]:
    """The ids among `booth_ids` that name no booth (the seam answers `unknown_reference`)."""
    ids = {int(pk) for pk in booth_ids}
    found = set(Booth.objects.filter(pk__in=ids).values_list("pk", flat=True))
    return sorted(ids - found)
