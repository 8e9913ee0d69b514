"""The waiting list's public views (docs/spec.md "Waiting list").

- `POST /events/<id>/waitlist` (the event page's form, CSRF) and `POST /api/v1/events/<id>/
  waitlist` (JSON, like the intake API: `application/json`, the pinned error shape, 503 with
  `Retry-After` when Redis or the database does not answer) call `waitlist.join`, after the
  intake's order of gates: unknown / unpublished event (404), then the `intake` rate limit —
  the same counter as the registration form and API.
- `GET /waitlist/offer/<token>/` shows a held offer and a confirm form; `POST` (CSRF) accepts
  it (`waitlist.accept`) and answers 303 to the new registration's tickets page. They go
  through the token routes' wrapper (`views._token_route`: secret, `token` rate limit, the
  uniform 404 for any bad, old, removed, expired or accepted link, no token in any log line),
  with `Referrer-Policy: same-origin` like the cancel step (its form must post its origin).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_POST

from events import inputs, ratelimit, rules, waitlist_form
from events.client import client_address
from events.errors import (
    CapabilityRefused,
    Code,
    DomainError,
    NotFound,
    RateLimited,
    SecretMissing,
    ValidationFailed,
    http_status,
)
from events.models import ActorType, Event, Slot, Ticket
from events.openapi import api, json_answer, json_body, ref
from events.read import selectors
from events.services import links, registrations, seats, waitlist
from events.services.audit import Actor
from events.views import UNAVAILABLE_RETRY_AFTER, _tickets_not_found, _token_route
from events.views_api import PUBLIC_TAG, TRANSPORT_ERRORS, json_post

logger = logging.getLogger("events.attendee")

PUBLIC = Actor(ActorType.PUBLIC, label="public waiting list")


def _pick(model: type[Ticket] | type[Slot], event: Event, raw: Any) -> Any:
    """The ticket / slot of the event an id names; None when none was given;
    `registrations.UNKNOWN` when the id names nothing of this event."""
    if raw is None or raw == "":
        return None
    pk = inputs.as_id(raw)
    row = model.objects.filter(pk=pk, event=event).first() if pk is not None else None
    return registrations.UNKNOWN if row is None else row


def _join(
    request: HttpRequest, event: Event, data: Mapping[str, Any], *, ticket: str, slot: str
) -> waitlist.Joined:
    """Join with the fields of `data`; `ticket` and `slot` name its id fields (the form's
    `ticket` / `slot`, the JSON API's `ticket_id` / `slot_id`)."""
    return waitlist.join(
        event=event,
        ticket=_pick(Ticket, event, data.get(ticket)),
        slot=_pick(Slot, event, data.get(slot)),
        name=data.get("name"),
        email=data.get("email"),
        actor=PUBLIC,
        lang=data.get("lang") or None,
        language=getattr(request, "expressed_language", None),
    )


# --- the event page's form ---------------------------------------------------------------------


@require_POST
def join_page(request: HttpRequest, event_id: int) -> HttpResponse:
    event = selectors.public_event(event_id=event_id)
    if event is None:
        raise Http404("No such event.")
    try:
        ratelimit.hit(scope="intake", client=client_address(request))
        joined = _join(request, event, request.POST, ticket="ticket", slot="slot")
    except ratelimit.LimiterUnavailable as error:
        logger.error("waiting list form: rate limiter unavailable (%s): answering 503", error)
        response = render(request, "events/unavailable.html", {"event": event}, status=503)
        response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
        return response
    except DomainError as error:
        now = timezone.now()
        form = waitlist_form.build(
            event=event,
            now=now,
            summaries=seats.ticket_summaries(event=event),
            closed=rules.closed_reason(event, now=now),
            posted=request.POST,
            error=error,
        )
        response = render(
            request,
            "events/waitlist_join.html",
            {"event": event, "waitlist": form, "error": error},
            status=http_status(error.code),
        )
        if isinstance(error, RateLimited):
            response["Retry-After"] = str(error.details["retry_after"])
        return response
    # One page for a new entry and for an address already listed: nothing of the entry itself
    # (its place, its state) is shown to whoever typed the address.
    return render(
        request,
        "events/waitlist_joined.html",
        {
            "event": event,
            "ticket": joined.entry.ticket,
            "email": joined.entry.email,
            "hours": settings.EVENT_WAITLIST_OFFER_HOURS,
        },
    )


# --- the JSON API ------------------------------------------------------------------------------


def _joined_body(joined: waitlist.Joined) -> dict[str, Any]:
    """The same answer for a new entry and for an address already listed: the request's own
    event, pair and (normalised) address, never the entry's id, place or state, which would
    tell anyone who types an address whether, and how far up, that person waits."""
    entry = joined.entry
    return {
        "status": "received",
        "event_id": entry.event_id,
        "ticket_id": entry.ticket_id,
        "slot_id": entry.slot_id,
        "email": entry.email,
    }


@api.operation(
    "post",
    operation_id="joinWaitingList",
    summary="Join the waiting list of a sold-out ticket",
    description="When a seat frees, the first on the list gets an offer by mail. Rate limited "
    "with the intake (the same counter).",
    tags=[PUBLIC_TAG],
    path_parameters={"event_id": "A published event."},
    body=json_body(ref("WaitlistJoin")),
    responses={
        201: json_answer(
            "Received (also when the address was on the list already).",
            ref("WaitlistReceived"),
            headers={"Cache-Control": True},
        )
    },
    errors=(
        "invalid_value",
        "not_found",
        "rate_limited",
        "invalid_attendee",
        "registrations_closed",
        "ticket_required",
        "invalid_ticket",
        "slot_required",
        "invalid_slot",
        "sale_not_started",
        "sale_ended",
        "priced_ticket",
        "seats_available",
        *TRANSPORT_ERRORS,
    ),
)
@json_post(
    api="waiting list API",
    limiter_message=gettext_lazy("The waiting list is temporarily unavailable; try again soon."),
)
def join_api(request: HttpRequest, event_id: int) -> JsonResponse:
    """201 `received`, whether the address was on the list already or not (`_joined_body`)."""
    body = request.body
    event = Event.objects.filter(pk=event_id, is_published=True, active=True).first()
    if event is None:
        raise NotFound(_("No such event."))
    ratelimit.hit(scope="intake", client=client_address(request))
    try:
        payload = inputs.load_json(body)
    except ValueError:  # not JSON, not UTF-8, or nested too deeply
        payload = None
    if not isinstance(payload, Mapping):
        raise ValidationFailed(_("The body must be a JSON object."), code="invalid_value")
    joined = _join(request, event, payload, ticket="ticket_id", slot="slot_id")
    response = JsonResponse(_joined_body(joined), status=201)
    response["Cache-Control"] = "private, no-store"
    return response


# --- the offer link ----------------------------------------------------------------------------

# Why a valid, open offer could not be accepted, told as such (anything else: a general message,
# logged). A bad or dead link never gets here: it is the uniform 404.
REFUSALS = {
    Code.SOLD_OUT: gettext_lazy(
        "The organiser reduced the seats of this event, so this offer can no longer be "
        "honoured. Please contact the organiser."
    ),
    Code.REGISTRATIONS_CLOSED: gettext_lazy("Registrations for this event are closed."),
    Code.PRICED_TICKET: gettext_lazy(
        "This ticket is now sold through the organiser's shop, not here."
    ),
}
NOT_NOW = gettext_lazy("Your seat could not be confirmed just now. Please try again in a moment.")


@csrf_exempt  # checked inside the token gates (csrf_protect below), so a refusal gets them too
@require_http_methods(["GET", "POST"])
@_token_route(_tickets_not_found, referrer_policy="same-origin")
@csrf_protect
def offer(request: HttpRequest, token: str) -> HttpResponse:
    """GET: the offer (event, seat, until when) and its confirm form. POST (CSRF):
    `waitlist.accept`, then 303 to the registration's tickets page (again for an offer
    accepted before: a double submit lands on the same tickets)."""
    now = timezone.now()
    if request.method == "GET":
        return _offer_page(request, waitlist.offer_for(token=token, now=now))
    try:
        accepted = waitlist.accept(token=token, now=now)
    except (CapabilityRefused, SecretMissing):
        raise  # the token gates' answers (the uniform 404, 503)
    except DomainError as error:
        message = REFUSALS.get(error.code)
        if message is None:
            logger.error("waiting list offer: refused with %s", error)
        response = _offer_page(
            request, waitlist.offer_for(token=token, now=now), error=message or NOT_NOW
        )
        response.status_code = http_status(error.code)
        return response
    response = redirect(links.tickets_path(accepted.registration))
    response.status_code = 303
    return response


def _offer_page(request: HttpRequest, entry, *, error: str = "") -> HttpResponse:
    event = entry.event
    slot = entry.slot if event.is_multi_slots else None
    return render(
        request,
        "events/waitlist_offer.html",
        {
            "entry": entry,
            "event": event,
            "begin": slot.start_datetime if slot is not None else event.date_begin,
            "offer_path": request.path,
            "error": error,
        },
    )
