"""Thin views: each reads through selectors or calls a service, then renders.

The token routes (/my-tickets/, its /cancel confirm step, /ics/) share one wrapper that applies
the gates of spec.md §7.2 in order (secret → rate limit → capability), answers every refusal
with one uniform body, sets `Cache-Control: private, no-store` and `Referrer-Policy:
no-referrer` (`same-origin` on the cancel step, whose form must post its origin), and keeps the
path (which holds the token) out of Django's request log. An unreachable rate limiter answers 503;
any other failure is a 500 whose log line has the token masked (access_log.TokenMaskingFilter).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from functools import wraps
from urllib.parse import urlsplit

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods

from events import barcodes, health, inputs, intake_form, ratelimit, rules, waitlist_form
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
from events.models import Registration, RegistrationState
from events.openapi import api, json_answer, ref
from events.read import ics as ics_service
from events.read import selectors
from events.services import capability, intake, links, seats, self_service, ticket_pdf
from events.views_api import json_methods

logger = logging.getLogger("events.attendee")
api.register_tag("Operations", "Health and the API description itself.")

TOKEN_HEADERS = {"Cache-Control": "private, no-store", "Referrer-Policy": "no-referrer"}
ICS_NOT_FOUND = b"Not found.\n"
UNAVAILABLE = b"This page is temporarily unavailable.\n"
UNAVAILABLE_RETRY_AFTER = 5


@api.operation(
    "get",
    operation_id="health",
    summary="Liveness of PostgreSQL and the Redis broker",
    tags=["Operations"],
    responses={
        200: json_answer('Both services answer: `{"db": "ok", "broker": "ok"}`.', ref("Health")),
        503: json_answer("A service does not answer: its entry names the error.", ref("Health")),
    },
)
@json_methods("GET")
def healthz(request):
    report = health.probe()
    status = 200 if all(v == "ok" for v in report.values()) else 503
    return JsonResponse(report, status=status)


@require_GET
def event_list(request):
    events = selectors.public_event_list(now=timezone.now())
    return render(request, "events/event_list.html", {"events": events})


# --- event page and its registration form (intake) -------------------------------------------


@require_http_methods(["GET", "POST"])
def event_detail(request: HttpRequest, event_id: int) -> HttpResponse:
    now = timezone.now()
    if request.method == "POST":
        payload, key = intake_form.payload_from_post(request.POST)
        try:
            result = intake.submit(
                event_id=event_id,
                payload=payload,
                client=client_address(request),
                idempotency_key=key,
                now=now,
                language=getattr(request, "expressed_language", None),
            )
        except NotFound:
            raise Http404("No such event.") from None
        except ratelimit.LimiterUnavailable as error:
            # Nothing was decided or written: a friendly page, and a retry is safe.
            logger.error("event page: rate limiter unavailable (%s): answering 503", error)
            response = render(
                request,
                "events/unavailable.html",
                {"event": selectors.public_event(event_id=event_id)},
                status=503,
            )
            response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
            return response
        except DomainError as error:
            event = selectors.public_event(event_id=event_id)
            if event is None:
                raise Http404("No such event.") from None
            if error.details.get("field") == "Idempotency-Key":
                key = None  # a refused key is not offered again: the page mints a fresh one
            response = _event_page(
                request, event, now=now, posted=request.POST, error=error, key=key
            )
            response.status_code = http_status(error.code)
            if isinstance(error, RateLimited):
                response["Retry-After"] = str(error.details["retry_after"])
            return response
        return _registered(request, result.body)

    event = selectors.public_event(event_id=event_id)
    if event is None:
        raise Http404("No such event.")
    return _event_page(request, event, now=now)


def _event_page(request, event, *, now, posted=None, error=None, key=None) -> HttpResponse:
    summaries = seats.ticket_summaries(event=event)
    closed = rules.closed_reason(event, now=now)
    form = intake_form.build(
        event=event,
        now=now,
        summaries=summaries,
        closed=closed,
        quantity=request.GET.get("quantity"),
        posted=posted,
        error=error,
        idempotency_key=key or secrets.token_urlsafe(18),
    )
    # Sold-out tickets / slots offer their waiting list (its form posts to events.views_waitlist).
    waitlist = waitlist_form.build(event=event, now=now, summaries=summaries, closed=closed)
    return render(
        request, "events/event_detail.html", {"event": event, "form": form, "waitlist": waitlist}
    )


def _registered(request: HttpRequest, body: dict) -> HttpResponse:
    """One attendee: to their tickets page. Several: a page listing each attendee's links."""
    rows = body["registrations"]
    if len(rows) == 1:
        response = redirect(urlsplit(rows[0]["tickets_url"]).path, permanent=False)
        response.status_code = 303
    else:
        items = [
            {
                "number": index + 1,
                "tickets_path": urlsplit(row["tickets_url"]).path,
                "ics_path": urlsplit(row["ics_url"]).path,
            }
            for index, row in enumerate(rows)
        ]
        names = selectors.registration_names(registration_ids=[row["id"] for row in rows])
        for item, row in zip(items, rows, strict=True):
            item["name"] = names.get(row["id"], "")
        response = render(request, "events/registered.html", {"items": items})
    for header, value in TOKEN_HEADERS.items():
        response[header] = value
    return response


# --- token routes ----------------------------------------------------------------------------


def _token_route(not_found: Callable[[], HttpResponse], *, referrer_policy: str = "no-referrer"):
    """`referrer_policy`: `no-referrer` on every token page but one: the cancel page's form
    needs `same-origin`, or the browser posts `Origin: null` and CSRF refuses it (the token
    still never leaves the site in a Referer)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request: HttpRequest, token: str, **route_args) -> HttpResponse:
            route = view.__name__
            try:
                if not capability.secret_ok():
                    raise SecretMissing(_("The capability secret is not configured."))
                ratelimit.hit(scope="token", client=client_address(request))
                response = view(request, token, **route_args)
            except SecretMissing:
                logger.error("%s: capability secret missing or too short: answering 503", route)
                response = HttpResponse(
                    UNAVAILABLE,
                    status=http_status(SecretMissing.code),
                    content_type="text/plain; charset=utf-8",
                )
            except ratelimit.LimiterUnavailable as error:
                # Fail closed, like a missing secret: no counter, no page (and no 500, whose
                # log line would carry the path).
                logger.error("%s: rate limiter unavailable (%s): answering 503", route, error)
                response = HttpResponse(
                    UNAVAILABLE, status=503, content_type="text/plain; charset=utf-8"
                )
            except RateLimited as error:
                response = HttpResponse(
                    b"Too many requests.\n",
                    status=http_status(error.code),
                    content_type="text/plain; charset=utf-8",
                )
                response["Retry-After"] = str(error.details["retry_after"])
            except CapabilityRefused as error:
                # The reason only: the token itself is never logged.
                logger.info("%s: link refused (%s)", route, error.details.get("reason", "?"))
                response = not_found()
            for header, value in TOKEN_HEADERS.items():
                response[header] = value
            response["Referrer-Policy"] = referrer_policy
            # Django's request logger prints the path, which holds the token: we logged above.
            response._has_been_logged = True
            return response

        return wrapper

    return decorate


def _ics_not_found() -> HttpResponse:
    return HttpResponse(
        ICS_NOT_FOUND,
        status=http_status(CapabilityRefused.code),
        content_type="text/plain; charset=utf-8",
    )


def _tickets_not_found() -> HttpResponse:
    return HttpResponse(
        render_to_string("events/link_not_found.html"), status=http_status(CapabilityRefused.code)
    )


def _shown(claim: capability.Claim, registration: Registration | None) -> Registration:
    """The registration a tickets/ics link may show: current, and not a draft."""
    registration = capability.current(claim=claim, registration=registration)
    if registration.state == RegistrationState.DRAFT:
        raise CapabilityRefused(_("Invalid link."), reason="draft_registration")
    return registration


@require_GET
@_token_route(_ics_not_found)
def ics(request: HttpRequest, token: str) -> HttpResponse:
    claim = capability.read(purpose="ics", token=token)
    # One statement reads the gates' columns and the calendar's (selectors.calendar_registration);
    # the file then comes from the shared cache unless it changed (ics.calendar_file).
    registration = _shown(claim, selectors.calendar_registration(registration_id=claim.subject))
    filename, body = ics_service.calendar_file(registration=registration)
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _tickets_rows(claim: capability.Claim) -> list[Registration]:
    """The registrations a tickets page shows: the link's own (not a draft), or every
    non-draft registration of the link's order."""
    if claim.purpose == "tickets":
        return [_shown(claim, selectors.ticket_registration(registration_id=claim.subject))]
    rows = selectors.order_registrations(order_ref=capability.current_order(claim=claim))
    if not rows:
        raise CapabilityRefused(_("Invalid link."), reason="empty_order")
    return rows


@require_GET
@_token_route(_tickets_not_found)
def my_tickets(request: HttpRequest, token: str) -> HttpResponse:
    claim = capability.read_any(purposes=self_service.PURPOSES, token=token)
    rows = _tickets_rows(claim)
    now = timezone.now()
    cancel_path = reverse("my-tickets-cancel", kwargs={"token": token})
    just_cancelled = inputs.as_id(request.GET.get("cancelled"))
    tickets = []
    for row in rows:
        card = _ticket_card(row)
        card.update(_cancel_offer(row, now=now, cancel_path=cancel_path))
        card["pdf_path"] = (
            reverse("my-tickets-pdf", kwargs={"token": token, "registration_id": row.pk})
            if ticket_pdf.has_ticket(row)
            else None
        )
        card["just_cancelled"] = row.pk == just_cancelled and card["cancelled"]
        tickets.append(card)
    return render(
        request,
        "events/my_tickets.html",
        {"tickets": tickets, "order": claim.purpose == "order"},
    )


@require_GET
@_token_route(_tickets_not_found)
def my_ticket_pdf(request: HttpRequest, token: str, registration_id: int) -> HttpResponse:
    """The PDF ticket of one registration the link shows (`tickets`: its own; `order`: each of
    the order's). Any other registration, or one without a ticket (cancelled, its event
    cancelled), is the uniform 404. A read: nothing is written."""
    claim = capability.read_any(purposes=self_service.PURPOSES, token=token)
    registration = next((row for row in _tickets_rows(claim) if row.pk == registration_id), None)
    if registration is None:
        raise CapabilityRefused(_("Invalid link."), reason="other_registration")
    if not ticket_pdf.has_ticket(registration):
        raise CapabilityRefused(_("Invalid link."), reason="no_ticket")
    body = ticket_pdf.render(
        registration=registration, logo=ticket_pdf.logo_of(registration.event_id)
    )
    response = HttpResponse(body, content_type=ticket_pdf.CONTENT_TYPE)
    response["Content-Disposition"] = f'inline; filename="{ticket_pdf.filename(registration)}"'
    return response


# Refusals worth telling on the tickets page (the attendee can still act: ask the organiser);
# the others (cancelled, attended, started) speak for themselves.
CANCEL_NOTES = {Code.REGISTRATION_SOLD, Code.CANCEL_DEADLINE_PASSED}


def _cancel_offer(registration: Registration, *, now, cancel_path: str) -> dict:
    """What the tickets page offers for cancelling `registration` (self_service's policy)."""
    refused = self_service.refusal(registration, now=now)
    if refused is not None:
        return {
            "cancel_path": None,
            "cancel_note": refused.message if refused.code in CANCEL_NOTES else "",
        }
    return {
        "cancel_path": f"{cancel_path}?registration={registration.pk}",
        "cancel_note": "",
        "cancel_until": (
            self_service.deadline(registration)
            if registration.event.cancel_deadline_hours
            else None
        ),
    }


# The refusals a visitor is told as they are; any other failure (an unwired mail port, …)
# gets a general message, its details logged.
TOLD = {
    Code.ALREADY_CANCELLED,
    Code.EVENT_CANCELLED,
    Code.EVENT_STARTED,
    Code.REGISTRATION_SOLD,
    Code.CANCEL_DEADLINE_PASSED,
    Code.INVALID_TRANSITION,
    Code.INVALID_VALUE,
}
NOT_NOW = gettext_lazy("Your registration could not be cancelled just now. Please try again later.")


@csrf_exempt  # checked inside the token gates (csrf_protect below), so a refusal gets them too
@require_http_methods(["GET", "POST"])
@_token_route(_tickets_not_found, referrer_policy="same-origin")
@csrf_protect
def my_tickets_cancel(request: HttpRequest, token: str) -> HttpResponse:
    """GET: the confirm step (what will be cancelled, one form per registration). POST (CSRF,
    one `registration` id): `self_service.cancel_by_attendee`, then back to the tickets page."""
    claim = capability.read_any(purposes=self_service.PURPOSES, token=token)
    rows = {row.pk: row for row in _tickets_rows(claim)}
    now = timezone.now()
    tickets_path = reverse("my-tickets", kwargs={"token": token})
    if request.method == "GET":
        wanted = request.GET.getlist("registration")
        chosen = _chosen(rows, wanted) if wanted else list(rows.values())
        return _confirm_page(request, token, chosen, now=now)
    wanted = request.POST.getlist("registration")
    if len(wanted) != 1:
        error = ValidationFailed(
            _("Choose one registration to cancel."), code=Code.INVALID_VALUE, field="registration"
        )
        response = _confirm_page(request, token, list(rows.values()), now=now, error=error)
        response.status_code = http_status(error.code)
        return response
    (target,) = _chosen(rows, wanted)
    try:
        result = self_service.cancel_by_attendee(token=token, registration_id=target.pk, now=now)
    except (CapabilityRefused, SecretMissing):
        raise  # the token gates' answers (the uniform 404, 503)
    except DomainError as error:
        if error.code not in TOLD:
            logger.error("my_tickets_cancel: refused with %s", error)
        # As committed now (a concurrent cancel may have changed it since it was read).
        fresh = selectors.ticket_registration(registration_id=target.pk) or target
        response = _confirm_page(request, token, [fresh], now=now, error=error)
        response.status_code = http_status(error.code)
        return response
    response = redirect(f"{tickets_path}?cancelled={result.registration.pk}")
    response.status_code = 303
    return response


def _chosen(rows: dict[int, Registration], wanted: list[str]) -> list[Registration]:
    """The registrations named by `wanted` ids, each one the link shows (else the uniform 404)."""
    chosen = []
    for raw in wanted:
        row = rows.get(inputs.as_id(raw) or 0)
        if row is None:
            raise CapabilityRefused(_("Invalid link."), reason="other_registration")
        if row not in chosen:
            chosen.append(row)
    return chosen


def _confirm_page(request, token: str, chosen: list[Registration], *, now, error=None):
    cancel_path = reverse("my-tickets-cancel", kwargs={"token": token})
    message = ""
    if error is not None:
        message = error.message if error.code in TOLD else NOT_NOW
    items = []
    for row in chosen:
        card = _ticket_card(row)
        refused = self_service.refusal(row, now=now)
        card["can_cancel"] = refused is None
        # Said once: in the alert when it is what the POST was refused for.
        card["refusal"] = "" if refused is None or refused.message == message else refused.message
        card["cancel_until"] = (
            self_service.deadline(row) if row.event.cancel_deadline_hours else None
        )
        items.append(card)
    return render(
        request,
        "events/my_tickets_cancel.html",
        {
            "tickets": items,
            "cancel_path": cancel_path,
            "tickets_path": reverse("my-tickets", kwargs={"token": token}),
            "error": message,
        },
    )


def _ticket_card(registration: Registration) -> dict:
    event = registration.event
    slot = registration.slot if event.is_multi_slots else None
    cancelled = ics_service.is_cancelled(registration)
    qr = None
    if not cancelled:
        qr = (
            barcodes.qr_code(registration.barcode)
            .svg_inline(
                scale=5,
                omitsize=True,
                title=_("QR code of ticket %(barcode)s") % {"barcode": registration.barcode},
            )
            .replace(
                "<svg ",
                format_html('<svg role="img" aria-label="{}" ', _("QR code of your ticket")),
                1,
            )
        )
    return {
        "registration": registration,
        "event": event,
        "slot": slot,
        "begin": slot.start_datetime if slot else event.date_begin,
        "end": slot.end_datetime if slot else event.date_end,
        "cancelled": cancelled,
        "event_cancelled": rules.is_cancelled(event),
        "qr_svg": qr,
        "ics_path": links.ics_path(registration),
    }
