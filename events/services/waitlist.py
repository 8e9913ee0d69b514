"""The waiting list of an event (docs/spec.md "Waiting list").

Invariants:
- every verb locks the Event row first (`locks.lock_event`, the lock every seat change takes),
  then its entries, then decides, then writes with its audit rows, in one transaction; a refusal
  writes nothing;
- an `offered` entry holds exactly one seat (`SeatLedger.held`): the hold, the entry's new state
  and its offer mail (the outbox) are written in one transaction, so a seat is never held
  without its mail nor a mail sent without its seat; an accept moves that seat to the new
  registration (`registrations.register(held_seats=1)`); an expiry or a removal releases it and,
  in the same transaction, offers the seats now free to the next entries;
- offers go in joining order (`id`) per (ticket, slot) pair, and only while a hold fits the
  pair's limits (decided by the seat ledger on the counters it produced); one live entry per
  (event, ticket, slot, email) (a partial unique index; emails are kept in lower case); an offer
  link carries `offer_version`, which every new offer and a removal raise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from events import i18n, inputs, ports, rules
from events.adapters import format_begin, html_to_text
from events.db import locks
from events.errors import (
    CapabilityRefused,
    InvalidTransition,
    NotFound,
    RegistrationsClosed,
    SeatsAvailable,
    SeatsUnavailable,
    ValidationFailed,
)
from events.models import (
    ActorType,
    Event,
    Registration,
    Slot,
    Ticket,
    WaitlistEntry,
    WaitlistState,
)
from events.services import audit, capability, links, registrations, waitlist_nudge
from events.services import seats as seat_engine
from events.services.audit import Actor
from events.services.contacts import is_valid_email

logger = logging.getLogger("events.waitlist")

W = WaitlistState
LIVE = (W.WAITING, W.OFFERED)
# Offers made by one pass at most; a pass that made this many nudges another one.
OFFER_BATCH = 100
# The beat task: expires offers, then offers free seats wherever someone waits (safety net).
PASS_TASK = "events.waitlist_pass"  # noqa: S105 — a Celery task name
MAIL_TEMPLATE = "events/mail/waitlist_offer.html"
MAIL_SUBJECT = "events/mail/waitlist_offer_subject.txt"
SYSTEM = Actor(ActorType.SYSTEM, label="waiting list")


@dataclass(frozen=True)
class Joined:
    entry: WaitlistEntry
    created: bool  # False: the person was on this list already (nothing written)
    position: int | None  # 1-based place among the pair's waiting entries; None once offered


@dataclass(frozen=True)
class Accepted:
    entry: WaitlistEntry
    registration: Registration
    created: bool  # False: the offer was accepted before; its registration is answered again


# --- reads -------------------------------------------------------------------------------------


def _pair(ticket_id: int | None, slot_id: int | None) -> Q:
    """The entries of one (ticket, slot) pair (None: the column is NULL)."""
    ticket = Q(ticket_id=ticket_id) if ticket_id is not None else Q(ticket__isnull=True)
    slot = Q(slot_id=slot_id) if slot_id is not None else Q(slot__isnull=True)
    return ticket & slot


def position(entry: WaitlistEntry) -> int | None:
    """The entry's 1-based place among the waiting entries of its (ticket, slot) pair; None when
    it is not waiting."""
    if entry.state != W.WAITING:
        return None
    return (
        WaitlistEntry.objects.filter(event_id=entry.event_id, state=W.WAITING, pk__lte=entry.pk)
        .filter(_pair(entry.ticket_id, entry.slot_id))
        .count()
    )


def offer_path(entry: WaitlistEntry) -> str:
    """The path of the entry's current offer page (a capability link, purpose `offer`)."""
    token = capability.mint(purpose="offer", subject=entry)
    return reverse("waitlist-offer", kwargs={"token": token})


def offer_url(entry: WaitlistEntry) -> str:
    return links.absolute(offer_path(entry))


# --- join --------------------------------------------------------------------------------------


def _contact(value: Any, field: str) -> str:
    """The intake's rule for a contact field (text within its column), read from `inputs`."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(
            _("%(field)s must be text.") % {"field": inputs.FIELD_LABELS.get(field, field)},
            code="invalid_attendee",
            attendee=0,
            field=field,
        )
    return inputs.check_contact(value, field=field, attendee=0)


def _check_person(name: Any, email: Any) -> tuple[str, str]:
    name, email = _contact(name, "name"), _contact(email, "email")
    if not name:
        raise ValidationFailed(
            _("Please give your name."), code="invalid_attendee", attendee=0, field="name"
        )
    if not email:
        raise ValidationFailed(
            _("Please give your email address: the offer of a seat is sent there."),
            code="invalid_attendee",
            attendee=0,
            field="email",
        )
    if not is_valid_email(email):
        raise ValidationFailed(
            _("“%(email)s” is not an email address.") % {"email": email},
            code="invalid_attendee",
            attendee=0,
            field="email",
        )
    return name, email.lower()


def _check_sale(ticket: Ticket, now: datetime) -> None:
    """The intake's sale checks (`rules.sale_state`, same codes): a ticket not on sale here has
    no waiting list."""
    state = rules.sale_state(ticket=ticket, now=now)
    if state == "not_started":
        raise ValidationFailed(
            _("Sales of this ticket have not started yet."), code="sale_not_started", field="ticket"
        )
    if state == "ended":
        raise ValidationFailed(
            _("Sales of this ticket have ended."), code="sale_ended", field="ticket"
        )
    if state == "priced":
        raise ValidationFailed(
            _("This ticket is sold through our shop, not here."),
            code="priced_ticket",
            field="ticket",
        )


def join(
    *,
    event: Event,
    ticket: Ticket | Any | None = None,
    slot: Slot | Any | None = None,
    name: Any,
    email: Any,
    actor: Any,
    now: datetime | None = None,
    lang: Any = None,
    language: str | None = None,
) -> Joined:
    """Put a person on the waiting list of a sold-out (ticket, slot) pair of a public event.

    The entry keeps its language: `lang` (the body's, refused with `invalid_value` when it is
    not a product language), else `language` (the request's), else the event's default; its
    offer mail and the registration an accepted offer becomes use it.

    The intake's checks in the intake's order and codes: name and email (both required here),
    an unpublished event (`not_found`), closed registrations, the ticket / slot pair
    (`registrations.UNKNOWN` for an id that names none), the ticket's sale window and price;
    then a pair that is not sold out is refused with `seats_available`. A person already on
    this list (same pair and email, waiting or offered) gets their entry back, nothing written
    (`created=False`): for the caller only, which must answer it as it answers a new entry
    (the public views do: an entry's id, place and state are never told to whoever typed an
    address).
    """
    now = now or timezone.now()
    name, email = _check_person(name, email)
    lang = inputs.check_lang(lang)
    with transaction.atomic():
        locked = locks.lock_event(event.pk)
        if not (locked.is_published and locked.active):
            raise NotFound(_("No such event."))
        reason = rules.closed_reason(locked, now=now)
        if reason is not None:
            raise RegistrationsClosed(rules.closed_message(reason), reason=reason)
        fresh: Any = None
        if ticket is not None:
            # The ticket as committed now (its price and sale window may have changed).
            fresh = (
                Ticket.objects.filter(pk=ticket.pk, event=locked).first()
                if isinstance(ticket, Ticket)
                else None
            ) or registrations.UNKNOWN
        ticket, slot = registrations.check_pair(
            event=locked,
            has_tickets=Ticket.objects.filter(event=locked).exists(),
            ticket=fresh,
            slot=slot,
        )
        if ticket is not None:
            _check_sale(ticket, now)
        ticket_id = ticket.pk if ticket is not None else None
        slot_id = slot.pk if slot is not None else None
        # Decided before the look-up of an entry for this email: every check a newcomer meets,
        # someone already listed meets too, so no answer tells whether an address is listed.
        available = seat_engine.availability(event=locked, ticket=ticket, slot=slot)
        if available is None or available > 0:
            raise SeatsAvailable(_("Seats are available: please register instead."))
        existing = (
            WaitlistEntry.objects.filter(event=locked, state__in=LIVE, email=email)
            .filter(_pair(ticket_id, slot_id))
            .order_by("pk")
            .first()
        )
        if existing is not None:
            return Joined(existing, False, position(existing))
        entry = WaitlistEntry.objects.create(
            event=locked,
            ticket=ticket,
            slot=slot,
            name=name,
            email=email,
            lang=i18n.choose(lang, language, event=locked),
        )
        audit.record(
            actor=actor,
            verb="waitlist.joined",
            event=locked,
            data={"entry": entry.pk, "ticket": ticket_id, "slot": slot_id},
        )
        return Joined(entry, True, position(entry))


# --- offers ------------------------------------------------------------------------------------


def _may_offer(event: Event, now: datetime) -> bool:
    return event.is_published and event.active and rules.closed_reason(event, now=now) is None


def _open_pairs(event: Event, tickets: dict[int, Ticket], now: datetime) -> dict[tuple, Any]:
    """(slot_id, ticket_id) → seats still to be had (None: unlimited), for each pair with a seat
    free whose ticket is on sale here (free, in its sale window)."""
    found: dict[tuple, Any] = {}
    for key, numbers in seat_engine.ticket_summaries(event=event).items():
        available = numbers["available"]
        if available is not None and available <= 0:
            continue
        ticket = tickets.get(key[1]) if key[1] is not None else None
        if ticket is not None and rules.sale_state(ticket=ticket, now=now) != "open":
            continue
        found[key] = available
    return found


def _offer_next(
    event: Event, *, now: datetime, entries: list[WaitlistEntry] | None = None, actor: Any = SYSTEM
) -> list[WaitlistEntry]:
    """Offer seats: to `entries` (staff's "offer now"), else to the next waiting entries in
    joining order while their pair has a free seat. The caller holds the Event row lock inside
    its transaction; everything is written in it."""
    tickets = {t.pk: t for t in Ticket.objects.filter(event=event)}
    if entries is None:
        if not _may_offer(event, now):
            return []
        pairs = _open_pairs(event, tickets, now)
        if not pairs:
            return []
        candidates: list[int] = []
        for (slot_id, ticket_id), available in pairs.items():
            room = OFFER_BATCH if available is None else min(available, OFFER_BATCH)
            candidates += list(
                WaitlistEntry.objects.filter(event=event, state=W.WAITING)
                .filter(_pair(ticket_id, slot_id))
                .order_by("pk")
                .values_list("pk", flat=True)[:room]
            )
        if not candidates:
            return []
        entries = list(
            WaitlistEntry.objects.select_for_update(of=("self",))
            .select_related("slot")
            .filter(pk__in=sorted(candidates)[:OFFER_BATCH], state=W.WAITING)
            .order_by("pk")
        )
    hours = settings.EVENT_WAITLIST_OFFER_HOURS
    expires_at = now + timedelta(hours=hours)
    gone: set[tuple] = set()
    offered: list[WaitlistEntry] = []
    for entry in entries:
        key = (entry.slot_id, entry.ticket_id)
        if key in gone:
            continue
        try:
            # A savepoint per hold: the ledger decides on the counters its increment produced
            # (limits shared by several pairs included) and a refusal undoes only this hold.
            with transaction.atomic():
                seat_engine.reserve(
                    event=event,
                    slot_id=entry.slot_id,
                    ticket=tickets.get(entry.ticket_id) if entry.ticket_id else None,
                    count=1,
                    hold=True,
                )
        except SeatsUnavailable:
            gone.add(key)  # seats only go down during a pass: the pair is done
            continue
        entry.state = W.OFFERED
        entry.offered_at = now
        entry.expires_at = expires_at
        entry.offer_version += 1
        entry.save(
            update_fields=["state", "offered_at", "expires_at", "offer_version", "updated_at"]
        )
        offered.append(entry)
    if not offered:
        return []
    audit.record_many(
        [
            audit.entry(
                actor=actor,
                verb="waitlist.offered",
                event=event,
                data={
                    "entry": entry.pk,
                    "ticket": entry.ticket_id,
                    "slot": entry.slot_id,
                    "offer_version": entry.offer_version,
                    "expires_at": expires_at.isoformat(),
                },
            )
            for entry in offered
        ]
    )
    # In the hold's transaction: a worker killed before the commit leaves neither the hold nor
    # the mail; after it, both (the outbox delivers the mail).
    ports.mail_queue().enqueue_many(
        messages=[_offer_mail(event, entry, tickets, hours) for entry in offered]
    )
    return offered


def offer_freed_seats(*, event: Event | int, now: datetime | None = None) -> list[WaitlistEntry]:
    """Offer the event's free seats to its waiting entries, in joining order per (ticket, slot):
    each offer holds its seat, starts its window of EVENT_WAITLIST_OFFER_HOURS and queues its
    mail, all in one transaction. Nothing happens on an unpublished, cancelled, over or ended
    event. Returns the entries offered (at most OFFER_BATCH; when that many, another pass is
    nudged)."""
    now = now or timezone.now()
    event_id = event if isinstance(event, int) else event.pk
    with transaction.atomic():
        try:
            locked = locks.lock_event(event_id)
        except Event.DoesNotExist:
            return []
        offered = _offer_next(locked, now=now)
        if len(offered) >= OFFER_BATCH:
            waitlist_nudge.seats_freed(locked)
    return offered


def offer_waiting(*, now: datetime | None = None) -> int:
    """Beat's safety net for lost nudges: an offer pass on every open event where someone
    waits and a seat seems free (read without a lock; the pass decides under it)."""
    now = now or timezone.now()
    ids = (
        WaitlistEntry.objects.filter(
            state=W.WAITING, event__is_published=True, event__active=True, event__date_end__gt=now
        )
        .order_by("event_id")
        .values_list("event_id", flat=True)
        .distinct()
    )
    offered = 0
    for event in Event.objects.filter(pk__in=list(ids)).order_by("pk"):
        tickets = {t.pk: t for t in Ticket.objects.filter(event=event)}
        if _open_pairs(event, tickets, now):
            offered += len(offer_freed_seats(event=event.pk, now=now))
    return offered


# --- accept ------------------------------------------------------------------------------------


def accept(*, token: str, now: datetime | None = None) -> Accepted:
    """Register the person of an offer on its held seat (`register(held_seats=1)`).

    A bad, old (another offer since), removed, expired or unknown offer link raises
    `CapabilityRefused` (the uniform 404); the offer's window ends at `expires_at` even before
    beat releases it. An offer accepted before answers its registration again (`created`
    False): two accepts at once register once. Refused cleanly, nothing written: a cancelled,
    over or ended event (`registrations_closed`), a ticket now priced (`priced_ticket`), a limit
    forced below the seats taken (`sold_out`)."""
    now = now or timezone.now()
    claim = capability.read(purpose="offer", token=token)  # signature only, no query
    with transaction.atomic():
        # The entry's event never changes: read it unlocked to know which Event row to lock.
        event_id = (
            WaitlistEntry.objects.filter(pk=claim.subject)
            .values_list("event_id", flat=True)
            .first()
        )
        if event_id is None:
            raise CapabilityRefused(_("Invalid link."), reason="unknown_entry")
        event = locks.lock_event(event_id)
        entry = capability.current_offer(
            claim=claim,
            entry=WaitlistEntry.objects.select_for_update(of=("self",))
            .select_related("ticket", "slot", "registration")
            .filter(pk=claim.subject)
            .first(),
        )
        if entry.state == W.ACCEPTED:
            if entry.registration is None:  # the registration was deleted by hand since
                raise CapabilityRefused(_("Invalid link."), reason="accepted_entry")
            return Accepted(entry, entry.registration, False)
        if entry.expires_at is None or now >= entry.expires_at:
            raise CapabilityRefused(_("Invalid link."), reason="expired_offer")

        def recheck(locked: Event, ticket: Ticket | None) -> None:
            # On the inputs register() confirms under the Event lock (this block holds it
            # already): what may have changed since the offer.
            reason = rules.closed_reason(locked, now=now)
            if reason is not None:
                raise RegistrationsClosed(rules.closed_message(reason), reason=reason)
            if ticket is not None and ticket.price > 0:
                raise ValidationFailed(
                    _("This ticket is sold through our shop, not here."),
                    code="priced_ticket",
                    field="ticket",
                )

        (registration,) = registrations.register(
            event=event,
            attendees=[{"name": entry.name, "email": entry.email}],
            ticket=entry.ticket,
            slot=entry.slot,
            state="open",
            held_seats=1,
            recheck=recheck,
            lang=entry.lang,
            actor=Actor(ActorType.ATTENDEE, id=str(entry.pk), label="waiting-list offer"),
            now=now,
        )
        entry.state = W.ACCEPTED
        entry.registration = registration
        entry.save(update_fields=["state", "registration", "updated_at"])
        audit.record(
            actor=Actor(ActorType.ATTENDEE, id=str(entry.pk), label="waiting-list offer"),
            verb="waitlist.accepted",
            registration=registration,
            data={"entry": entry.pk, "offer_version": entry.offer_version},
        )
    return Accepted(entry, registration, True)


def offer_for(*, token: str, now: datetime | None = None) -> WaitlistEntry:
    """The entry an offer link shows (GET): current and still open (offered, not expired);
    anything else raises `CapabilityRefused` (an accepted offer's page is gone too: its
    registration has its own tickets link)."""
    now = now or timezone.now()
    claim = capability.read(purpose="offer", token=token)
    entry = capability.current_offer(
        claim=claim,
        entry=WaitlistEntry.objects.select_related("event", "ticket", "slot")
        .filter(pk=claim.subject)
        .first(),
    )
    if entry.state != W.OFFERED:
        raise CapabilityRefused(_("Invalid link."), reason=f"{entry.state}_entry")
    if entry.expires_at is None or now >= entry.expires_at:
        raise CapabilityRefused(_("Invalid link."), reason="expired_offer")
    return entry


# --- expiry and staff verbs --------------------------------------------------------------------


def _release(event: Event, entries: list[WaitlistEntry]) -> None:
    """Give the held seats of offered `entries` back (one ledger statement)."""
    seat_engine.apply(
        event=event,
        holds=[seat_engine.Hold(e.slot_id, e.ticket_id, held=-1) for e in entries],
    )


def expire_offers(*, now: datetime | None = None) -> int:
    """Expire every offer whose window ended: release its seat, mark it `expired`, audit it, and
    offer the seats now free to the next entries — per event, in one transaction under its lock
    (the seat goes from one entry to the next without ever being free to the public). Returns
    the number of offers expired."""
    now = now or timezone.now()
    event_ids = sorted(
        set(
            WaitlistEntry.objects.filter(state=W.OFFERED, expires_at__lte=now).values_list(
                "event_id", flat=True
            )
        )
    )
    expired = 0
    for event_id in event_ids:
        with transaction.atomic():
            event = locks.lock_event(event_id)
            entries = list(
                WaitlistEntry.objects.select_for_update(of=("self",))
                .filter(event_id=event_id, state=W.OFFERED, expires_at__lte=now)
                .order_by("pk")
            )
            if not entries:
                continue  # accepted or removed meanwhile
            _release(event, entries)
            for entry in entries:
                entry.state = W.EXPIRED
                entry.save(update_fields=["state", "updated_at"])
            audit.record_many(
                [
                    audit.entry(
                        actor=SYSTEM,
                        verb="waitlist.expired",
                        event=event,
                        data={
                            "entry": e.pk,
                            "offer_version": e.offer_version,
                            "expires_at": e.expires_at.isoformat() if e.expires_at else None,
                        },
                    )
                    for e in entries
                ]
            )
            _offer_next(event, now=now)
        expired += len(entries)
    return expired


def _locked_entry(entry: WaitlistEntry) -> tuple[Event, WaitlistEntry]:
    event = locks.lock_event(entry.event_id)
    locked = (
        WaitlistEntry.objects.select_for_update(of=("self",))
        .select_related("ticket", "slot")
        .get(pk=entry.pk)
    )
    return event, locked


def remove(*, entry: WaitlistEntry, actor: Any, now: datetime | None = None) -> WaitlistEntry:
    """Staff take an entry off the list (waiting or offered). An offer's seat is released and
    offered to the next entry in the same transaction; its link dies (`offer_version` + 1)."""
    now = now or timezone.now()
    with transaction.atomic():
        event, locked = _locked_entry(entry)
        before = locked.state
        if before not in LIVE:
            raise InvalidTransition(
                _("A %(state)s entry cannot be removed.") % {"state": before},
                state=before,
                to=W.REMOVED,
            )
        if before == W.OFFERED:
            _release(event, [locked])
        locked.state = W.REMOVED
        locked.offer_version += 1
        locked.save(update_fields=["state", "offer_version", "updated_at"])
        audit.record(
            actor=actor,
            verb="waitlist.removed",
            event=event,
            data={"entry": locked.pk, "state": [before, W.REMOVED]},
        )
        if before == W.OFFERED:
            _offer_next(event, now=now)
    return locked


def offer_now(*, entry: WaitlistEntry, actor: Any, now: datetime | None = None) -> WaitlistEntry:
    """Staff offer a seat to this waiting entry now, ahead of its turn, when its pair has a free
    seat (`sold_out` otherwise: an offer never holds a seat the limits do not have)."""
    now = now or timezone.now()
    with transaction.atomic():
        event, locked = _locked_entry(entry)
        if locked.state != W.WAITING:
            raise InvalidTransition(
                _("A %(state)s entry cannot be offered a seat.") % {"state": locked.state},
                state=locked.state,
                to=W.OFFERED,
            )
        reason = rules.closed_reason(event, now=now)
        if reason is not None:
            raise RegistrationsClosed(rules.closed_message(reason), reason=reason)
        if locked.ticket is not None:
            _check_sale(locked.ticket, now)
        offered = _offer_next(event, now=now, entries=[locked], actor=actor)
        if not offered:
            raise SeatsUnavailable(_("No seat of this ticket / slot is free."))
    return offered[0]


# --- the offer mail ----------------------------------------------------------------------------


def mail_key(entry: WaitlistEntry) -> str:
    """The outbox idempotency key of an entry's current offer: one mail per offer."""
    return f"waitlist-offer-w{entry.pk}-v{entry.offer_version}"


def _offer_mail(
    event: Event, entry: WaitlistEntry, tickets: dict[int, Ticket], hours: int
) -> ports.OutgoingMail:
    slot = entry.slot if entry.slot_id else None
    begin = slot.start_datetime if slot is not None else event.date_begin
    ticket = tickets.get(entry.ticket_id) if entry.ticket_id else None
    assert entry.expires_at is not None
    # In the entry's language, whatever language this process runs in.
    lang = i18n.choose(entry.lang, event=event)
    with translation.override(lang):
        context = {
            "name": entry.name,
            "event_name": i18n.localized(event, "name", lang),
            "event_begin": format_begin(begin, event.date_tz),
            "venue": i18n.localized(event, "venue", lang),
            "organizer": event.organizer,
            "ticket_name": i18n.localized(ticket, "name", lang) if ticket is not None else "",
            "expires": format_begin(entry.expires_at, event.date_tz),
            "hours": hours,
            "offer_url": offer_url(entry),
        }
        subject = " ".join(render_to_string(MAIL_SUBJECT, context).split())
        markup = render_to_string(MAIL_TEMPLATE, context)
    return ports.OutgoingMail(
        idempotency_key=mail_key(entry),
        recipient=entry.email,
        subject=subject,
        body_text=html_to_text(markup),
        body_html=markup,
    )
