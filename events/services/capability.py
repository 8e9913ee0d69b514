"""Capability tokens (spec.md §7.1): read one thing without an account.

Invariants:
- signed with EVENT_CAPABILITY_SECRET (never SECRET_KEY, never a SECRET_KEY_FALLBACKS key: the
  Signer gets an explicit empty fallback list), one salt per purpose, so a token of one
  purpose never opens another; signatures are compared in constant time by Django's Signer;
- a `tickets`/`ics` token carries the registration's `token_version`; an `order` token carries
  the highest `token_version` among all the order's registrations (archived ones too, so
  archiving never lowers it); `revoke_links` raises the registration's version above that
  highest one, so every link of that registration, its order's links included, stops opening;
- an `offer` token names a waiting-list entry and carries its `offer_version` (raised by every
  new offer and by a removal), so only the entry's current offer opens (`current_offer`);
- fail-closed: with the secret missing or shorter than 32 characters, mint and verify raise
  `SecretMissing`; every bad token raises the one `CapabilityRefused` (its `reason` is for the
  log, never for the client, and never carries the token).
"""

from __future__ import annotations

import binascii
import zlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.db.models import Count, F, Max, Q
from django.utils.translation import gettext as _

from events import secret_knobs
from events.db import locks
from events.errors import CapabilityRefused, SecretMissing
from events.models import Registration, WaitlistEntry, WaitlistState
from events.services import audit

# Links of a registration (or its order); `offer`: a waiting-list offer, signed for the entry.
REGISTRATION_PURPOSES = ("tickets", "order", "ics")
PURPOSES = (*REGISTRATION_PURPOSES, "offer")
# The payload format; a future format gets a new number and verify keeps reading the old one.
FORMAT = 1


def secret_ok() -> bool:
    """The rule of the start-up check (events.E001), applied again: settings may change."""
    try:
        secret_knobs.capability_secret(getattr(settings, "EVENT_CAPABILITY_SECRET", None))
    except secret_knobs.SecretProblem:
        return False
    return True


def _signer(purpose: str) -> signing.Signer:
    if not secret_ok():
        raise SecretMissing(_("The capability secret is not configured."))
    if purpose not in PURPOSES:
        raise CapabilityRefused(_("Unknown purpose."), reason="purpose")
    # fallback_keys=[]: Django's Signer otherwise also accepts signatures made with any key of
    # settings.SECRET_KEY_FALLBACKS, which are not capability secrets (nor meant to stay).
    return signing.Signer(
        key=settings.EVENT_CAPABILITY_SECRET,
        salt=f"events.capability.{purpose}",
        fallback_keys=[],
    )


def _order_version(order_ref: str) -> int | None:
    """The highest token_version of all the order's registrations, archived ones included
    (None: no such order, i.e. no active registration)."""
    if not order_ref:
        return None
    row = Registration.objects.filter(sale_order_ref=order_ref).aggregate(
        v=Max("token_version"), live=Count("pk", filter=Q(active=True))
    )
    return row["v"] if row["live"] else None


def mint(*, purpose: str, subject: Registration | WaitlistEntry | int | str) -> str:
    """A token for a registration (tickets, ics), an order ref (order) or a waiting-list entry's
    current offer (offer)."""
    signer = _signer(purpose)
    if purpose == "offer":
        entry = (
            subject
            if isinstance(subject, WaitlistEntry)
            else WaitlistEntry.objects.only("pk", "offer_version").get(pk=int(subject))  # type: ignore[arg-type]
        )
        return signer.sign_object({"f": FORMAT, "s": entry.pk, "v": entry.offer_version})
    if purpose == "order":
        order_ref = str(subject)
        version = _order_version(order_ref)
        if version is None:
            raise CapabilityRefused(_("No such order."), reason="unknown_order")
        return signer.sign_object({"f": FORMAT, "s": order_ref, "v": version})
    if isinstance(subject, WaitlistEntry):
        raise TypeError(f"a {purpose} token names a registration, not a waiting-list entry")
    registration = (
        subject
        if isinstance(subject, Registration)
        else Registration.objects.only("pk", "token_version").get(pk=int(subject))
    )
    return signer.sign_object({"f": FORMAT, "s": registration.pk, "v": registration.token_version})


def _payload(purpose: str, token: str) -> dict[str, Any]:
    signer = _signer(purpose)
    if not isinstance(token, str) or signer.sep not in token:
        raise CapabilityRefused(_("Invalid link."), reason="malformed")
    try:
        payload = signer.unsign_object(token)
    except signing.BadSignature:
        reason = _bad_signature_reason(purpose, token)
        raise CapabilityRefused(_("Invalid link."), reason=reason) from None
    except (ValueError, TypeError, binascii.Error, zlib.error):
        # A valid signature over an undecodable payload: only a holder of the secret makes one.
        raise CapabilityRefused(_("Invalid link."), reason="malformed") from None
    if (
        not isinstance(payload, dict)
        or payload.get("f") != FORMAT
        or not isinstance(payload.get("v"), int)
        or "s" not in payload
    ):
        raise CapabilityRefused(_("Invalid link."), reason="malformed")
    return payload


def _bad_signature_reason(purpose: str, token: str) -> str:
    """Tell a token of another purpose from a forged one (for the log only)."""
    for other in PURPOSES:
        if other == purpose:
            continue
        try:
            _signer(other).unsign(token)
        except signing.BadSignature:
            continue
        return "wrong_purpose"
    return "bad_signature"


@dataclass(frozen=True)
class Claim:
    """What a well-signed token says; not yet checked against the database."""

    purpose: str
    subject: int | str
    version: int


def read(*, purpose: str, token: str) -> Claim:
    """The claim of a token signed for `purpose` (no database access)."""
    payload = _payload(purpose, token)
    subject = payload["s"]
    if purpose == "order" and not isinstance(subject, str):
        raise CapabilityRefused(_("Invalid link."), reason="malformed")
    if purpose != "order" and (not isinstance(subject, int) or isinstance(subject, bool)):
        raise CapabilityRefused(_("Invalid link."), reason="malformed")
    return Claim(purpose, subject, payload["v"])


def current(*, claim: Claim, registration: Registration | None) -> Registration:
    """The registration a `tickets`/`ics` claim names, loaded by the caller (any select_related
    it needs, one query), if it is still the current holder of that link."""
    if registration is None or registration.pk != claim.subject:
        raise CapabilityRefused(_("Invalid link."), reason="unknown_registration")
    if not registration.active:
        raise CapabilityRefused(_("Invalid link."), reason="archived_registration")
    if registration.token_version != claim.version:
        raise CapabilityRefused(_("Invalid link."), reason="stale_version")
    return registration


def current_offer(*, claim: Claim, entry: WaitlistEntry | None) -> WaitlistEntry:
    """The waiting-list entry an `offer` claim names, loaded by the caller, if the claim is its
    current offer (same `offer_version`) and the entry is offered or accepted: an accepted
    offer's link still names it (the accept is answered again), any other state is dead."""
    if entry is None or entry.pk != claim.subject:
        raise CapabilityRefused(_("Invalid link."), reason="unknown_entry")
    if entry.offer_version != claim.version:
        raise CapabilityRefused(_("Invalid link."), reason="stale_version")
    if entry.state not in (WaitlistState.OFFERED, WaitlistState.ACCEPTED):
        raise CapabilityRefused(_("Invalid link."), reason=f"{entry.state}_entry")
    return entry


def current_order(*, claim: Claim) -> str:
    """The order ref of an `order` claim if no registration of the order had its links revoked
    since the token was minted (one aggregate query)."""
    order_ref = str(claim.subject)  # an `order` claim's subject is the order ref
    version = _order_version(order_ref)
    if version is None:
        raise CapabilityRefused(_("Invalid link."), reason="unknown_order")
    if version != claim.version:
        raise CapabilityRefused(_("Invalid link."), reason="stale_version")
    return order_ref


def verify(*, purpose: str, token: str) -> int | str:
    """The subject (registration id, order ref, or waiting-list entry id) of a valid, current
    token.

    Raises CapabilityRefused for a malformed or forged token, a token of another purpose, a
    stale version, or an unknown or archived registration (an order without active ones).
    """
    claim = read(purpose=purpose, token=token)
    if purpose == "order":
        return current_order(claim=claim)
    if purpose == "offer":
        entry = (
            WaitlistEntry.objects.filter(pk=claim.subject)
            .only("pk", "state", "offer_version")
            .first()
        )
        return current_offer(claim=claim, entry=entry).pk
    registration = (
        Registration.objects.filter(pk=claim.subject).only("pk", "active", "token_version").first()
    )
    return current(claim=claim, registration=registration).pk


def read_any(*, purposes: tuple[str, ...], token: str) -> Claim:
    """The claim of a token signed for one of `purposes` (tried in that order)."""
    for index, purpose in enumerate(purposes):
        try:
            return read(purpose=purpose, token=token)
        except CapabilityRefused as error:
            if error.details.get("reason") != "wrong_purpose" or index == len(purposes) - 1:
                raise
    raise CapabilityRefused(_("Invalid link."), reason="purpose")


def revoke_links(*, registration: Registration, actor: Any) -> Registration:
    """Bump the registration's token_version: every link minted before stops opening.

    In a sale order the new version is the order's highest + 1 (not the registration's own
    + 1): an order link carries that highest version, and a mere +1 can land on a value an
    order link minted after an earlier revocation already carries.
    """
    with transaction.atomic():
        order_ref = registration.sale_order_ref  # set at creation, never changed
        if not order_ref:
            _event, reg = locks.lock_event_and_registration(registration.event_id, registration.pk)
            before = reg.token_version
            Registration.objects.filter(pk=reg.pk).update(token_version=F("token_version") + 1)
        else:
            # The order's events, then its registrations, each ascending (the fixed lock
            # order): two revocations in one order never both read the same highest version.
            order = Registration.objects.filter(sale_order_ref=order_ref)
            locks.lock_events(order.values_list("event_id", flat=True))
            highest = max(
                order.select_for_update(of=("self",))
                .order_by("pk")
                .values_list("token_version", flat=True)
            )
            reg = locks.lock_registration(registration.pk)
            before = reg.token_version
            Registration.objects.filter(pk=reg.pk).update(token_version=highest + 1)
        reg.refresh_from_db(fields=["token_version"])
        audit.record(
            actor=actor,
            verb="registration.links_revoked",
            registration=reg,
            data={"token_version": [before, reg.token_version]},
        )
    return reg
