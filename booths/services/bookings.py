"""Booth bookings (spec-overlay.md §2.3): request, confirm, release, and the order-level verbs
the sale seam calls.

Invariants:
- every decision on a booth is taken under its row lock (booths locked in ascending id order):
  lock, then read the booth's bookings, then decide, then write, then audit, one transaction;
- at most one confirmed booking per booth: a second confirmation gets `booth_unavailable`; the
  partial unique index `one_confirmed_booking_per_booth` is the backstop for any writer that
  skips the lock, and its violation is reported as `booth_unavailable` too;
- a booth is `unavailable` exactly when it has a confirmed booking (a staff block is a
  confirmed booking with no order); confirming copies the renter onto the booth and cancels
  the booth's other pending bookings; releasing clears the renter;
- an order's booths are confirmed all or none (`confirm_order_booths`), and releasing an
  order's booths (`release_order_booths`) frees them for another order. Both are idempotent,
  so a replayed seam message changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from booths.errors import BoothUnavailable
from booths.models import BookingState, Booth, BoothBooking, BoothState
from booths.services.locks import lock_booth, lock_booths
from events.errors import InvalidTransition, NotFound, ValidationFailed
from events.models import EventAuditLog
from events.services import audit
from events.services.locking import constraint_refusal

UNIQUE_CONFIRMED = "one_confirmed_booking_per_booth"
RENTER_FIELDS = (
    "state",
    "partner_ref",
    "contact_name",
    "contact_email",
    "contact_phone",
    "is_paid",
    "order_ref",
    "order_line_ref",
)


@dataclass
class OrderBooths:
    """What `confirm_order_booths` did: the bookings it confirmed now, those the order already
    held (a replay), the booths it released (the order no longer names them), and the order
    refs whose pending bookings it cancelled (their booths were just sold to this order: the
    host may cancel those quotations)."""

    confirmed: list[BoothBooking] = field(default_factory=list)
    already_confirmed: list[BoothBooking] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    cancelled_order_refs: list[str] = field(default_factory=list)


@dataclass
class OrderRelease:
    released_booths: list[int] = field(default_factory=list)
    cancelled_bookings: list[int] = field(default_factory=list)


def _unique_confirmed_is_unavailable(booth_ids: Collection[int]) -> AbstractContextManager[None]:
    """Wrap the transaction: a violation of the partial unique index (a writer bypassed the
    booth lock) is `booth_unavailable`, after the transaction rolled back."""
    return constraint_refusal(
        UNIQUE_CONFIRMED,
        lambda: BoothUnavailable(
            "The booth already has a confirmed booking.",
            booths=sorted(booth_ids),
            via="unique_index",
        ),
    )


def _contact(contact: Mapping[str, Any] | None) -> dict[str, str]:
    contact = contact or {}
    return {
        "contact_name": (contact.get("name") or "").strip(),
        "contact_email": (contact.get("email") or "").strip(),
        "contact_phone": (contact.get("phone") or "").strip(),
    }


def _live_bookings(booth_ids: Collection[int], *, also: int | None = None) -> list[BoothBooking]:
    """Pending and confirmed bookings of the (locked) booths, plus booking `also` whatever its
    state, in one statement, read after the lock (READ COMMITTED: a fresh snapshot)."""
    where = Q(booth_id__in=booth_ids) & ~Q(state=BookingState.CANCELLED)
    if also is not None:
        where |= Q(pk=also)
    return list(BoothBooking.objects.filter(where).order_by("pk"))


def _booth_names(booths: Sequence[Booth]) -> str:
    return ", ".join(f"{b.name} (#{b.pk})" for b in booths)


def _confirm(
    booth: Booth, booking: BoothBooking, live: Sequence[BoothBooking], actor: Any
) -> list[str]:
    """Confirm `booking` on the locked `booth` whose live bookings are `live` (none of them
    confirmed: the caller decided). Returns the order refs of the pendings it cancelled."""
    now = timezone.now()
    booking.state = BookingState.CONFIRMED
    booking.decided_at = now
    booking.save(update_fields=["state", "decided_at"])
    others = [b for b in live if b.state == BookingState.PENDING and b.pk != booking.pk]
    if others:
        BoothBooking.objects.filter(pk__in=[b.pk for b in others]).update(
            state=BookingState.CANCELLED, decided_at=now
        )
    cancelled_refs = list(dict.fromkeys(b.order_ref for b in others if b.order_ref))
    booth.state = BoothState.UNAVAILABLE
    booth.partner_ref = booking.partner_ref
    booth.contact_name = booking.contact_name
    booth.contact_email = booking.contact_email
    booth.contact_phone = booking.contact_phone
    booth.order_ref = booking.order_ref
    booth.order_line_ref = booking.order_line_ref
    booth.is_paid = False
    booth.save(update_fields=RENTER_FIELDS)
    audit.record(
        actor=actor,
        verb="booth.booked" if booking.order_ref else "booth.blocked",
        event=booth.event_id,
        data={
            "booth": booth.pk,
            "booking": booking.pk,
            "order_ref": booking.order_ref,
            "partner_ref": booking.partner_ref,
            "cancelled_bookings": [b.pk for b in others],
            "cancelled_order_refs": cancelled_refs,
        },
    )
    return cancelled_refs


def _release(booth: Booth, booking: BoothBooking, actor: Any) -> EventAuditLog:
    """Cancel the confirmed `booking` of the locked `booth` and clear the renter; returns the
    audit row for the caller to write with its others."""
    booking.state = BookingState.CANCELLED
    booking.decided_at = timezone.now()
    booking.save(update_fields=["state", "decided_at"])
    booth.state = BoothState.AVAILABLE
    booth.partner_ref = booth.contact_name = booth.contact_email = booth.contact_phone = ""
    booth.order_ref = booth.order_line_ref = ""
    booth.is_paid = False
    booth.save(update_fields=RENTER_FIELDS)
    return audit.entry(
        actor=actor,
        verb="booth.released",
        event=booth.event_id,
        data={"booth": booth.pk, "booking": booking.pk, "order_ref": booking.order_ref},
    )


def _cancel_pending(booth: Booth, booking: BoothBooking, actor: Any) -> EventAuditLog:
    booking.state = BookingState.CANCELLED
    booking.decided_at = timezone.now()
    booking.save(update_fields=["state", "decided_at"])
    return audit.entry(
        actor=actor,
        verb="booth_booking.cancelled",
        event=booth.event_id,
        data={"booth": booth.pk, "booking": booking.pk, "order_ref": booking.order_ref},
    )


# --- one booking ----------------------------------------------------------------------------


def request_booking(
    *,
    booth: Booth,
    order_ref: str,
    order_line_ref: str,
    partner_ref: str,
    contact: Mapping[str, Any] | None,
    actor: Any,
) -> BoothBooking:
    """A pending booking (a quotation's hold). Several may coexist on one booth; a booth
    already booked refuses with `booth_unavailable`. The same order line asking again gets its
    existing pending booking back."""
    if not (order_ref or "").strip():
        raise ValidationFailed("A booking request needs an order.", code="invalid_value")
    with transaction.atomic():
        booth = lock_booth(booth.pk)
        live = _live_bookings([booth.pk])
        if any(b.state == BookingState.CONFIRMED for b in live):
            raise BoothUnavailable(f"{_booth_names([booth])} is already booked.", booths=[booth.pk])
        for b in live:
            if (b.order_ref, b.order_line_ref) == (order_ref, order_line_ref):
                return b
        booking = BoothBooking.objects.create(
            booth=booth,
            order_ref=order_ref,
            order_line_ref=order_line_ref or "",
            partner_ref=partner_ref or "",
            **_contact(contact),
        )
        audit.record(
            actor=actor,
            verb="booth_booking.requested",
            event=booth.event_id,
            data={"booth": booth.pk, "booking": booking.pk, "order_ref": order_ref},
        )
    return booking


def confirm_booking(*, booking: BoothBooking, actor: Any) -> list[str]:
    """Confirm a pending booking: lock the booth; a booth already booked → `booth_unavailable`;
    else copy the renter onto the booth, mark it unavailable and cancel every other pending
    booking of the booth. Returns those bookings' order refs. Confirming the booking that
    already holds the booth is a no-op (returns [])."""
    with _unique_confirmed_is_unavailable([booking.booth_id]), transaction.atomic():
        booth = lock_booth(booking.booth_id)
        live = _live_bookings([booth.pk], also=booking.pk)
        booking = next(b for b in live if b.pk == booking.pk)
        holder = next((b for b in live if b.state == BookingState.CONFIRMED), None)
        if holder is not None and holder.pk == booking.pk:
            return []
        if holder is not None:
            raise BoothUnavailable(
                f"{_booth_names([booth])} is already booked.",
                booths=[booth.pk],
                booking=holder.pk,
            )
        if booking.state != BookingState.PENDING:
            raise InvalidTransition(
                "A cancelled booking cannot be confirmed; request the booth again.",
                booking=booking.pk,
                state=booking.state,
            )
        return _confirm(booth, booking, live, actor)


def release_booking(*, booking: BoothBooking, actor: Any) -> BoothBooking:
    """The confirmed booking → cancelled; its booth back to `available`, renter cleared.
    Only a confirmed booking is released (`invalid_transition` otherwise; a pending one is
    cancelled with `cancel_booking`)."""
    with transaction.atomic():
        booth = lock_booth(booking.booth_id)
        booking = BoothBooking.objects.get(pk=booking.pk)
        if booking.state != BookingState.CONFIRMED:
            raise InvalidTransition(
                "Only a confirmed booking can be released.", booking=booking.pk, state=booking.state
            )
        audit.record_many([_release(booth, booking, actor)])
    return booking


def release_booth(*, booth: Booth, actor: Any) -> BoothBooking:
    """Release whatever confirmed booking holds `booth` (an order's or a staff block);
    `invalid_transition` when the booth is not booked."""
    with transaction.atomic():
        booth = lock_booth(booth.pk)
        booking = booth.bookings.filter(state=BookingState.CONFIRMED).first()
        if booking is None:
            raise InvalidTransition("The booth is not booked: nothing to release.", booth=booth.pk)
        audit.record_many([_release(booth, booking, actor)])
    return booking


def cancel_booking(*, booking: BoothBooking, actor: Any) -> BoothBooking:
    """A pending booking → cancelled (the quotation was dropped); the booth is untouched."""
    with transaction.atomic():
        booth = lock_booth(booking.booth_id)
        booking = BoothBooking.objects.get(pk=booking.pk)
        if booking.state != BookingState.PENDING:
            raise InvalidTransition(
                "Only a pending booking can be cancelled; release a confirmed one.",
                booking=booking.pk,
                state=booking.state,
            )
        audit.record_many([_cancel_pending(booth, booking, actor)])
    return booking


def block_booth(*, booth: Booth, actor: Any) -> BoothBooking:
    """Staff take a free booth off sale by hand: a confirmed booking with no order."""
    with _unique_confirmed_is_unavailable([booth.pk]), transaction.atomic():
        booth = lock_booth(booth.pk)
        return block_locked_booth(booth=booth, actor=actor)


def block_locked_booth(*, booth: Booth, actor: Any) -> BoothBooking:
    """block_booth for a caller that already holds the booth's row lock."""
    live = _live_bookings([booth.pk])
    if any(b.state == BookingState.CONFIRMED for b in live):
        raise BoothUnavailable(f"{_booth_names([booth])} is already booked.", booths=[booth.pk])
    booking = BoothBooking.objects.create(booth=booth, state=BookingState.PENDING)
    _confirm(booth, booking, [*live, booking], actor)
    return booking


# --- an order's booths (the sale seam) ------------------------------------------------------


def _order_lines(lines: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """booth id → the order line naming it (the first, when a booth is named twice)."""
    wanted: dict[int, str] = {}
    for line in lines:
        for booth_id in line.get("booth_ids") or ():
            wanted.setdefault(int(booth_id), str(line.get("ref") or ""))
    return wanted


def confirm_order_booths(
    *,
    order_ref: str,
    lines: Sequence[Mapping[str, Any]],
    partner_ref: str,
    contact: Mapping[str, Any] | None,
    actor: Any,
    release_missing: bool = False,
) -> OrderBooths:
    """Confirm every booth the order's booth lines name (`{"ref", "booth_ids"}` each), or none.

    All booths are locked (ascending ids) before anything is decided. Any booth held by a
    confirmed booking of another order (or a staff block) → `BoothUnavailable` naming every
    such booth (`booths=[ids]`), nothing written. A booth this order already holds is left as
    it is, so a replay confirms nothing twice. The order's pending booking of a booth is the one
    confirmed (created when the host never requested one). An unknown booth id → `not_found`
    naming the ids (the seam checks `selectors.missing_booths` first: `unknown_reference`).
    `release_missing`: the lines are the order's whole truth (a later version of it), so the
    order's confirmed bookings of booths they no longer name are released, under the same
    locks and in the same all-or-nothing decision.
    """
    if not (order_ref or "").strip():
        raise ValidationFailed("An order ref is required.", code="invalid_value")
    wanted = _order_lines(lines)
    result = OrderBooths()
    dropped: set[int] = set()
    if release_missing:
        dropped = set(
            BoothBooking.objects.filter(order_ref=order_ref, state=BookingState.CONFIRMED)
            .exclude(booth_id__in=list(wanted))
            .values_list("booth_id", flat=True)
        )
    if not wanted and not dropped:
        return result
    with _unique_confirmed_is_unavailable(wanted), transaction.atomic():
        booths = lock_booths(set(wanted) | dropped)
        missing = sorted(set(wanted) - set(booths))
        if missing:
            raise NotFound(f"Unknown booths: {missing}.", booths=missing)
        live = _live_bookings(list(booths))
        holders = {b.booth_id: b for b in live if b.state == BookingState.CONFIRMED}
        taken = [
            booths[pk]
            for pk in sorted(holders)
            if pk in wanted and holders[pk].order_ref != order_ref
        ]
        if taken:
            raise BoothUnavailable(
                f"Already booked: {_booth_names(taken)}.",
                booths=[b.pk for b in taken],
                booth_names=[b.name for b in taken],
            )
        # Decided on the bookings read under the locks: only what the order still holds goes.
        result.released = [
            pk for pk in sorted(dropped) if pk in holders and holders[pk].order_ref == order_ref
        ]
        audit.record_many([_release(booths[pk], holders[pk], actor) for pk in result.released])
        contact_fields = _contact(contact)
        for pk, booth in booths.items():
            if pk not in wanted:
                continue
            if pk in holders:
                result.already_confirmed.append(holders[pk])
                continue
            mine = [b for b in live if b.booth_id == pk]
            booking = next(
                (b for b in mine if (b.order_ref, b.order_line_ref) == (order_ref, wanted[pk])),
                None,
            ) or next((b for b in mine if b.order_ref == order_ref), None)
            if booking is None:
                booking = BoothBooking.objects.create(
                    booth=booth,
                    order_ref=order_ref,
                    order_line_ref=wanted[pk],
                    partner_ref=partner_ref or "",
                    **contact_fields,
                )
                mine.append(booking)
            refs = _confirm(booth, booking, mine, actor)
            result.confirmed.append(booking)
            result.cancelled_order_refs.extend(r for r in refs if r != order_ref)
        result.cancelled_order_refs = list(dict.fromkeys(result.cancelled_order_refs))
    return result


def release_order_booths(*, order_ref: str, actor: Any) -> OrderRelease:
    """The order was cancelled: release every booth it holds (back to `available`, renter
    cleared) and cancel its pending bookings. Idempotent: a second call finds nothing."""
    result = OrderRelease()
    if not (order_ref or "").strip():
        return result
    booth_ids = set(
        BoothBooking.objects.filter(order_ref=order_ref)
        .exclude(state=BookingState.CANCELLED)
        .values_list("booth_id", flat=True)
    )
    if not booth_ids:
        return result
    with transaction.atomic():
        booths = lock_booths(booth_ids)
        # Read again under the locks: a confirmation may have cancelled some meanwhile.
        mine = BoothBooking.objects.filter(order_ref=order_ref, booth_id__in=list(booths))
        rows = []
        for booking in mine.exclude(state=BookingState.CANCELLED).order_by("booth_id", "pk"):
            booth = booths[booking.booth_id]
            if booking.state == BookingState.CONFIRMED:
                rows.append(_release(booth, booking, actor))
                result.released_booths.append(booth.pk)
            else:
                rows.append(_cancel_pending(booth, booking, actor))
                result.cancelled_bookings.append(booking.pk)
        audit.record_many(rows)
    return result


def mark_order_booths_paid(*, order_ref: str, actor: Any) -> list[int]:
    """The order was paid: set `is_paid` on the booths it holds. Returns the booths changed
    (none on a replay)."""
    if not (order_ref or "").strip():
        return []
    with transaction.atomic():
        booths = list(
            Booth.objects.select_for_update(of=("self",))
            .filter(order_ref=order_ref, state=BoothState.UNAVAILABLE, is_paid=False)
            .order_by("pk")
        )
        if not booths:
            return []
        Booth.objects.filter(pk__in=[b.pk for b in booths]).update(is_paid=True)
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb="booth.paid",
                    event=b.event_id,
                    data={"booth": b.pk, "order_ref": order_ref},
                )
                for b in booths
            ]
        )
    return [b.pk for b in booths]
