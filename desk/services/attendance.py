"""The desk verbs: scan a barcode, confirm an attendee by hand (spec-overlay.md §5.1).

Invariants:
- the barcode is trimmed of surrounding whitespace, then matched exactly (unique index);
- the branch order of `decide` is frozen; only `confirmed_registration` writes a state, and only
  through `events.services.registrations.mark_attended` (which sets `date_closed` once);
- a desk admits for its event and, on a multi-slot event, for the slot it chose: a ticket of
  another event or of another slot is `need_manual_confirmation` (step 5), nothing written;
- "not ongoing" (step 4) is core's one decision of "closed" (`events.rules.closed_reason`);
- an admission is decided on the locked rows (Event, then Registration: the order every core
  verb uses, so no deadlock with a concurrent cancel), so two desks scanning one ticket at once
  get one `confirmed_registration` and one `already_registered`; an answer that writes nothing
  is decided on the committed rows read by the lookup, without a lock;
- every scan, whatever its answer, writes one audit row with the desk actor, in the same
  transaction; nothing else is written on a refusal, except a conflict row (`desk.offline`)
  when a door admitted the ticket offline and the server answers otherwise — written with the
  scan's audit row, once per scan;
- a replayed offline scan is decided at its real time (`Replay.scanned_at`): the rules' "now",
  and the attendance's `date_closed`;
- with a `nonce`, the answer is stored (ScanNonce, unique (user, nonce)) in the statement that
  writes the scan's audit row (an admission: the transition's statement), so a retry, or a
  concurrent duplicate waiting on that unique index, fails its whole write and answers the
  stored first answer; a request refused before that (invalid_value, invalid_slot, not_found)
  writes and stores nothing.
"""

from __future__ import annotations

import hashlib
import json
import zoneinfo
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, NamedTuple

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from desk import selectors
from desk.errors import NonceReused
from desk.models import NONCE_MAX, ScanNonce
from desk.services import offline
from desk.services.offline import Replay
from events import inputs
from events import rules as core_rules
from events.errors import Code, NotFound, ValidationFailed
from events.models import ActorType, Event, Registration, RegistrationState
from events.services import audit, registrations
from events.services.audit import Actor
from events.services.locking import violated_constraint

BARCODE_MAX: int = Registration._meta.get_field("barcode").max_length or 0


class ScanStatus(StrEnum):
    INVALID_TICKET = "invalid_ticket"
    CANCELED_REGISTRATION = "canceled_registration"
    UNCONFIRMED_REGISTRATION = "unconfirmed_registration"
    NOT_ONGOING_EVENT = "not_ongoing_event"
    NEED_MANUAL_CONFIRMATION = "need_manual_confirmation"
    CONFIRMED_REGISTRATION = "confirmed_registration"
    ALREADY_REGISTERED = "already_registered"


def desk_actor(actor: Any) -> Actor:
    """The desk actor for audit rows: a staff user scanning at the desk keeps its id and name."""
    if isinstance(actor, AbstractBaseUser):
        return Actor(ActorType.DESK, str(actor.pk), actor.get_username())
    a = audit.as_actor(actor)
    return a if a.type == ActorType.DESK else Actor(ActorType.DESK, a.id, a.label)


def decide(
    *, state: str, not_ongoing: bool, other_event: bool, other_slot: bool = False
) -> ScanStatus:
    """The frozen branch order of §5.1 (steps 2–6; step 1 is "no registration"). Step 5's
    "another event" includes another slot of the desk's multi-slot event."""
    if state == RegistrationState.CANCEL:
        return ScanStatus.CANCELED_REGISTRATION
    if state == RegistrationState.DRAFT:
        return ScanStatus.UNCONFIRMED_REGISTRATION
    if not_ongoing:
        return ScanStatus.NOT_ONGOING_EVENT
    if state == RegistrationState.OPEN:
        if other_event or other_slot:
            return ScanStatus.NEED_MANUAL_CONFIRMATION
        return ScanStatus.CONFIRMED_REGISTRATION
    return ScanStatus.ALREADY_REGISTERED


def clean_barcode(barcode: str) -> str | None:
    """Surrounding whitespace off (scanners append a newline); None when it cannot match."""
    code = barcode.strip()
    if not code or len(code) > BARCODE_MAX or not inputs.storable(code):
        return None  # empty, too long, NUL or a lone surrogate: no barcode is like it
    return code


def scanned_text(barcode: str) -> str:
    """What was scanned, as the audit row keeps it (jsonb refuses NUL, UTF-8 lone surrogates):
    at most 64 characters, NUL removed, a lone surrogate written as its escape."""
    return barcode.replace("\x00", "")[:64].encode("utf-8", "backslashreplace").decode("utf-8")


def check_nonce(value: Any) -> str:
    """A client's nonce as it came: a string of 1–64 characters PostgreSQL can store, without
    control characters (`events.inputs`); anything else is `invalid_value` naming `nonce`."""
    if not isinstance(value, str) or not 1 <= len(value) <= NONCE_MAX:
        raise ValidationFailed(
            _("nonce must be a string of 1 to %(max)s characters.") % {"max": NONCE_MAX},
            code=Code.INVALID_VALUE,
            field="nonce",
        )
    if not inputs.storable(value) or not inputs.control_free(value):
        raise ValidationFailed(
            _("nonce must be one line of text without control characters."),
            code=Code.INVALID_VALUE,
            field="nonce",
        )
    return value


class _Nonce(NamedTuple):
    """A request's nonce: who sent it, the nonce, and the fingerprint of what it asked."""

    user_id: int
    nonce: str
    fingerprint: str

    def row(self, answer: dict[str, Any]) -> ScanNonce:
        return ScanNonce(
            user_id=self.user_id,
            nonce=self.nonce,
            fingerprint=self.fingerprint,
            answer=json.dumps(answer),
        )


def _nonce(actor: Any, nonce: str | None, **request: Any) -> _Nonce | None:
    if nonce is None:
        return None
    if not isinstance(actor, AbstractBaseUser):
        raise TypeError("a nonce is kept per desk user: the actor must be the user")
    text = json.dumps(request, sort_keys=True)  # ASCII: a lone surrogate is escaped
    return _Nonce(actor.pk, check_nonce(nonce), hashlib.sha256(text.encode()).hexdigest())


def _once(nonce: _Nonce | None, scan: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run the scan; when its write lost on the nonce's unique index (a retry, or a concurrent
    duplicate that committed first), answer the stored first answer instead."""
    if nonce is None:
        return scan()
    try:
        with _rolled_back_alone():
            return scan()
    except IntegrityError as exc:
        if violated_constraint(exc) != "desk_scan_nonce":
            raise
    stored = (
        ScanNonce.objects.filter(user_id=nonce.user_id, nonce=nonce.nonce)
        .values_list("fingerprint", "answer")
        .first()
    )
    if stored is None:  # the winner's row is committed before this write can fail on it
        raise RuntimeError("desk_scan_nonce violated but no row found")
    if stored[0] != nonce.fingerprint:
        raise NonceReused(_("This nonce was sent with another request."), field="nonce")
    return json.loads(stored[1])


@contextmanager
def _rolled_back_alone() -> Iterator[None]:
    """Outside a transaction the scan's write is its own (one statement, or the transition's
    transaction); inside one (a caller's, a test's), a savepoint keeps the enclosing
    transaction usable for the replay's read after the write failed."""
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
    else:
        yield


def register_attendee(
    *,
    barcode: str,
    event_id: int | None = None,
    slot_id: int | None = None,
    actor: Any,
    nonce: str | None = None,
    now=None,
    replay: Replay | None = None,
) -> dict[str, Any]:
    """Scan `barcode` at the desk of `event_id` (None: any event), admitting for `slot_id`
    (None: any slot), and answer `status` plus the registration summary (none for
    `invalid_ticket`).

    `replay`: the scan was made earlier, offline or not, and is sent now (its real time, what
    the door showed, the list it decided from); an offline admission the server does not
    confirm is recorded as a conflict and answered with `offline_conflict: true`. The nonce's
    fingerprint leaves the replay out: a scan whose online attempt did reach the server, sent
    again from the door's queue with its nonce, answers what the server answered then.

    A `slot_id` that names no slot, or a slot of another event than `event_id`, is refused
    (`invalid_slot`) before anything is read or written; without `event_id`, the slot names
    the desk's event. `nonce` (the desk user's, `check_nonce`): the same nonce again answers
    the first answer and writes nothing; with another request, `nonce_reused`."""
    now = (replay.scanned_at if replay is not None else None) or now or timezone.now()
    who = desk_actor(actor)
    key = _nonce(actor, nonce, verb="scan", barcode=barcode, event_id=event_id, slot_id=slot_id)
    if slot_id is not None:
        slot_event = selectors.slot_event_id(slot_id=slot_id)
        if slot_event is None or event_id not in (None, slot_event):
            raise ValidationFailed(
                _("slot_id must name a slot of the desk's event."),
                code=Code.INVALID_SLOT,
                field="slot_id",
            )
        event_id = slot_event
    desk = _Desk(event_id, slot_id, replay)
    return _once(key, lambda: _scan(barcode, who, now=now, desk=desk, nonce=key))


def _scan(barcode: str, who: Actor, *, now, desk: _Desk, nonce: _Nonce | None) -> dict[str, Any]:
    code = clean_barcode(barcode)
    found = selectors.scanned_registration(barcode=code) if code is not None else None
    if found is not None:
        return _check_in(*found, who, now=now, desk=desk, manual=False, nonce=nonce)
    answer = {"status": ScanStatus.INVALID_TICKET.value}
    # A trail of unknown codes tried at the door.
    data = {
        "status": answer["status"],
        "barcode": scanned_text(barcode),
        "desk_slot_id": desk.slot_id,
        **offline.audit_data(desk.replay),
    }
    if nonce is None:
        audit.record(actor=who, verb="registration.scanned", event=desk.event_id, data=data)
    else:
        scanned = audit.entry(
            actor=who, verb="registration.scanned", event=desk.event_id, data=data
        )
        audit.record_many([scanned], also=[nonce.row(answer)])  # one statement
    return answer


def confirm_attendance(
    *, registration_id: int, actor: Any, nonce: str | None = None, now=None
) -> dict[str, Any]:
    """The manual confirmation after `need_manual_confirmation`: the same branches without the
    other-event and other-slot check. An unknown id raises `NotFound`. `nonce`: as for
    `register_attendee`."""
    now = now or timezone.now()
    who = desk_actor(actor)
    key = _nonce(actor, nonce, verb="confirm", registration_id=registration_id)
    found = selectors.desk_registration(registration_id=registration_id)
    if found is None:
        raise NotFound(_("Registration %(id)s does not exist.") % {"id": registration_id})
    desk = _Desk(None, None)
    return _once(key, lambda: _check_in(*found, who, now=now, desk=desk, manual=True, nonce=key))


class _Desk(NamedTuple):
    """Where the scan happens: the desk's event and slot (None: any)."""

    event_id: int | None
    slot_id: int | None
    replay: Replay | None = None


class _NotAdmitted(Exception):
    """The locked rows answer otherwise than the lookup did (a second desk admitted the ticket
    meanwhile, the event was cancelled): `mark_attended` writes nothing."""

    def __init__(self, status: ScanStatus, event: Event, reg: Registration) -> None:
        super().__init__(status.value)
        self.status, self.event, self.reg = status, event, reg


def _check_in(
    found: Registration,
    answers: list[str],
    seen: registrations.Seen,
    who: Actor,
    *,
    now,
    desk: _Desk,
    manual: bool,
    nonce: _Nonce | None,
) -> dict[str, Any]:
    """Decide, write only on `confirmed_registration`, audit (and store the answer to a nonce).

    An answer that writes nothing is decided on the committed rows of the lookup (no lock: it
    is the last committed state) and writes its audit row alone (one statement). An admission
    is written by `mark_attended` in one round trip with its locks (Event, then Registration:
    the order of every core verb, so no deadlock with a concurrent cancel) while both rows are
    still the versions the lookup read (`seen`); when either changed, it is decided again on
    the locked rows, and when those answer otherwise, the transition writes nothing and the
    scan's audit row records that answer. The scan's audit row is written with the
    transition's, in its transaction. The answer to a nonce travels in the statement of the
    scan's audit row.
    """
    verb = "registration.attendance_confirmed" if manual else "registration.scanned"
    event = found.event
    status = _status(found, event, now=now, desk=desk)
    # `answers` were read by the lookup, before any write: the answer to a nonce is stored
    # with the write.
    reg = found
    if status == ScanStatus.CONFIRMED_REGISTRATION:
        locked: dict[str, Any] = {}

        def recheck(event: Event, reg: Registration) -> None:
            # The stage was read by the lookup; re-read it only if it changed meanwhile.
            if found.event.stage_id == event.stage_id:
                event.stage = found.event.stage
            answer = _status(reg, event, now=now, desk=desk)
            if answer != ScanStatus.CONFIRMED_REGISTRATION:
                raise _NotAdmitted(answer, event, reg)

        def admitted(event: Event, reg: Registration) -> list[ScanNonce]:
            # On the changed rows: the answer, stored with the transition when there is a nonce.
            locked["answer"] = _answer(status, found, reg, event, answers, now=now)
            return [nonce.row(locked["answer"])] if nonce is not None else []

        scanned = _entry(who, verb, found, status, desk)
        try:
            registrations.mark_attended(
                registration=found,
                actor=who,
                now=now,
                recheck=recheck,
                audit_also=[scanned],
                rows_also=admitted,
                seen=seen,
            )
            return locked["answer"]
        except _NotAdmitted as refused:
            status, event, reg = refused.status, refused.event, refused.reg
    conflict = offline.is_conflict(desk.replay, status.value)
    answer = _answer(status, found, reg, event, answers, now=now)
    if conflict:
        answer["offline_conflict"] = True
    also = [nonce.row(answer)] if nonce is not None else []
    row = _entry(who, verb, reg, status, desk)
    if not conflict:
        audit.record_many([row], also=also)
        return answer
    # The door had admitted this ticket offline: the conflict is written with the audit row.
    with transaction.atomic():
        audit.record_many([row], also=also)
        offline.record_conflict(registration=reg, replay=desk.replay, status=status.value, who=who)
    return answer


def _answer(
    status: ScanStatus, found: Registration, reg: Registration, event: Event, answers, *, now
) -> dict[str, Any]:
    if reg is not found and reg.slot_id == found.slot_id:
        reg.slot = found.slot  # already read by the lookup; spare a query
    return {"status": status.value, **summary(reg, event, now=now, answers=answers)}


def _entry(who: Actor, verb: str, reg: Registration, status: ScanStatus, desk: _Desk):
    return audit.entry(
        actor=who,
        verb=verb,
        event=reg.event_id,
        registration=reg,
        data={
            "status": status.value,
            "desk_event_id": desk.event_id,
            "desk_slot_id": desk.slot_id,
            **offline.audit_data(desk.replay),
        },
    )


def _status(reg: Registration, event: Event, *, now, desk: _Desk) -> ScanStatus:
    return decide(
        state=reg.state,
        not_ongoing=selectors.is_not_ongoing(event, now=now),
        other_event=desk.event_id is not None and desk.event_id != reg.event_id,
        other_slot=desk.slot_id is not None and desk.slot_id != reg.slot_id,
    )


def summary(
    reg: Registration, event: Event, *, now, answers: list[str] | None = None
) -> dict[str, Any]:
    """The pinned summary of §5.1 (Odoo's `_get_registration_summary`, with the sale fields),
    plus `is_paid`; `answers`: its choice answers when already read."""
    if answers is None:
        answers = selectors.choice_answers(registration_id=reg.pk)
    closed = reg.date_closed
    tz = zoneinfo.ZoneInfo(event.date_tz or "UTC")
    return {
        "id": reg.pk,
        "name": reg.name,
        "partner_ref": reg.partner_ref,
        "event_id": event.pk,
        "event_name": event.name,
        "ticket_name": reg.ticket.name if reg.ticket is not None else None,
        "slot_name": str(reg.slot) if reg.slot is not None else None,
        "company_name": reg.company_name,
        "registration_answers": answers,
        "sale_status": reg.sale_status,
        "is_paid": reg.is_paid,
        "has_to_pay": core_rules.has_to_pay(reg),
        "date_closed": closed.isoformat() if closed is not None else None,
        "is_date_closed_today": closed is not None
        and closed.astimezone(tz).date() == now.astimezone(tz).date(),
    }
