"""Name badges from the admin: a page on the event (`<id>/badges/`) to choose the label layout
and which registrations (filters like the registrations list), then print.

GET without `layout` shows the form; GET with it answers the PDF when the sheet has at most
`badges.BACKGROUND_BADGES` badges, else a page offering to prepare it; that page's POST queues
the sheet for the worker (`exports.request_export`, format `pdf`) and leads to the attendee
exports' progress page, then its download. Staff need the view permission on the event and
the export permission (a sheet lists attendees and their admission codes).
"""

from __future__ import annotations

from io import BytesIO

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from events import inputs
from events.admin import exports as export_views
from events.errors import Code, DomainError, ValidationFailed
from events.models import ExportFormat
from events.pdf.layouts import LAYOUTS
from events.read import badges, exports


def _id(data, field: str) -> int | None:
    raw = data.get(field) or ""
    if not raw:
        return None  # all of them
    value = inputs.as_id(raw)
    if value is None:
        raise ValidationFailed(f"Not a {field}.", code=Code.INVALID_VALUE, field=field)
    return value


def _chosen(event, data) -> badges.Options:
    return badges.options(
        event=event,
        layout=data.get("layout", ""),
        states=data.get("states", "open_done"),
        ticket_id=_id(data, "ticket"),
        slot_id=_id(data, "slot"),
    )


def badges_view(modeladmin: admin.ModelAdmin, request, object_id: str):
    """GET /admin/events/event/<id>/badges/ (POST: queue a large sheet for the worker)."""
    event = modeladmin.get_object(request, object_id)
    if event is None:
        raise Http404("no such event")
    if not modeladmin.has_view_permission(request, event) or not export_views.can_export(request):
        raise PermissionDenied
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    data = request.POST if request.method == "POST" else request.GET
    chosen = None
    error = ""
    if "layout" in data:
        try:
            chosen = _chosen(event, data)
        except DomainError as exc:
            error = f"{exc.code} — {exc.message}"
    total = badges.count(event.pk, chosen) if chosen else None
    if chosen is not None and request.method == "POST":
        export = exports.request_export(
            event_ids=[event.pk], file_format=ExportFormat.PDF, actor=request.user, options=chosen
        )
        messages.success(request, f"The badge sheet ({total} badges) is being prepared.")
        return redirect(reverse("admin:events_attendee_export", args=[export.pk]))
    if chosen is not None and total is not None and total <= badges.BACKGROUND_BADGES:
        out = BytesIO()
        badges.write(event, chosen, out)
        response = HttpResponse(out.getvalue(), content_type="application/pdf")
        response["Content-Disposition"] = f'inline; filename="{badges.filename(event, chosen)}"'
        return response
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Name badges of {event.name}",
        "subtitle": None,
        "opts": modeladmin.model._meta,
        "event": event,
        "layouts": LAYOUTS.values(),
        "states": badges.STATE_TITLES.items(),
        "tickets": event.tickets.order_by("sequence", "pk"),
        "slots": event.slots.order_by("start_datetime", "pk") if event.is_multi_slots else [],
        "chosen": chosen,
        "total": total,
        "limit": badges.BACKGROUND_BADGES,
        "error": error,
        "expires_hours": int(exports.EXPIRES_AFTER.total_seconds() // 3600),
    }
    return TemplateResponse(request, "admin/events/event/badges.html", context)
