"""Attendee exports from the admin: buttons on the event dashboard and two Event actions.

Only staff holding `events.export_registrations` export (`exports.PERMISSION`: the Event user
and Event manager groups, never the desk's; a 403 otherwise, and the actions and buttons are
not offered); the Event itself must be visible to them. CSV streams
(`StreamingHttpResponse` over `events.read.exports.stream_csv`) whatever its size. An XLSX
is built in memory: up to `exports.BACKGROUND_ROWS` registrations during the request, past that
by the worker — the GET shows a page with one "Prepare" button (a POST queues the build), then
a progress page that reloads itself (no script) until it offers the download link. Only the
requester sees the progress and downloads the file.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, StreamingHttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from events.errors import DomainError
from events.models import Event, ExportState
from events.read import exports

PERMISSION = exports.PERMISSION
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CONTENT_TYPES = {"csv": "text/csv", "xlsx": XLSX_TYPE, "pdf": "application/pdf"}
LIST_FORMATS = ("csv", "xlsx")  # attendee lists; a pdf is a badge sheet (events.admin.badges)
PROGRESS_REFRESH_SECONDS = 2


def can_export(request) -> bool:
    return exports.may_export(request.user)


def response(events: list[Event], fmt: str):
    ids = [e.pk for e in events]
    if fmt == "csv":
        resp = StreamingHttpResponse(exports.stream_csv(ids), content_type="text/csv")
    elif fmt == "xlsx":
        resp = HttpResponse(exports.xlsx(ids), content_type=XLSX_TYPE)
    else:
        raise Http404("unknown export format")
    resp["Content-Disposition"] = f'attachment; filename="{exports.filename(events, fmt)}"'
    return resp


def _queue(request, events: list[Event], fmt: str):
    export = exports.request_export(
        event_ids=[e.pk for e in events], file_format=fmt, actor=request.user
    )
    return redirect(reverse("admin:events_attendee_export", args=[export.pk]))


def export_view(modeladmin: admin.ModelAdmin, request, object_id: str, fmt: str):
    """GET /admin/events/event/<id>/export/<csv|xlsx>/ (POST: queue a large XLSX)."""
    event = modeladmin.get_object(request, object_id)
    if event is None:
        raise Http404("no such event")
    if not modeladmin.has_view_permission(request, event) or not can_export(request):
        raise PermissionDenied
    if fmt not in LIST_FORMATS:
        raise Http404("unknown export format")
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    if not exports.in_background([event.pk], fmt):
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        return response([event], fmt)
    if request.method == "POST":
        return _queue(request, [event], fmt)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Export the attendees of {event.name} ({fmt.upper()})",
        "subtitle": None,
        "opts": modeladmin.model._meta,
        "event": event,
        "fmt": fmt,
        "rows": exports.count([event.pk]),
        "limit": exports.BACKGROUND_ROWS,
        "expires_hours": int(exports.EXPIRES_AFTER.total_seconds() // 3600),
    }
    return TemplateResponse(request, "admin/events/event/export_prepare.html", context)


def export_progress_view(modeladmin: admin.ModelAdmin, request, export_id: int):
    """GET /admin/events/event/exports/<id>/: the state of a background export."""
    if not can_export(request):
        raise PermissionDenied
    try:
        export = exports.downloadable(export_id=export_id, user=request.user)
    except DomainError as exc:
        raise Http404("no such export") from exc
    running = export.state in (ExportState.QUEUED, ExportState.RUNNING)
    total = max(export.rows_total, export.rows_done, 1)
    events = list(Event.objects.filter(pk__in=export.event_ids).order_by("pk"))
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Attendee export: {export.filename}",
        "subtitle": None,
        "opts": modeladmin.model._meta,
        "export": export,
        "events": events,
        "running": running,
        "refresh_seconds": PROGRESS_REFRESH_SECONDS,
        "percent": min(100, round(100 * export.rows_done / total)),
        "size": len(exports.content_of(export)) if export.state == ExportState.DONE else 0,
        "expires_at": export.created_at + exports.EXPIRES_AFTER,
    }
    return TemplateResponse(request, "admin/events/event/export_progress.html", context)


def export_download_view(modeladmin: admin.ModelAdmin, request, export_id: int):
    """GET /admin/events/event/exports/<id>/download/: the finished file, to its requester."""
    if not can_export(request):
        raise PermissionDenied
    try:
        export = exports.downloadable(export_id=export_id, user=request.user)
    except DomainError as exc:
        raise Http404("no such export") from exc
    if export.state != ExportState.DONE:
        raise Http404("the export is not ready")
    resp = HttpResponse(exports.content_of(export), content_type=CONTENT_TYPES[export.file_format])
    resp["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    return resp


def _action(request, queryset, fmt: str):
    # Django offers and runs the actions only to `has_export_permission`; checked here too, so
    # an action added elsewhere without that guard cannot export.
    if not can_export(request):
        raise PermissionDenied
    events = list(queryset.order_by("pk"))
    if exports.in_background([e.pk for e in events], fmt):
        return _queue(request, events, fmt)  # an action is a POST already
    return response(events, fmt)


@admin.action(description="Export attendees (CSV)", permissions=["export"])
def export_attendees_csv(modeladmin, request, queryset):
    return _action(request, queryset, "csv")


@admin.action(description="Export attendees (XLSX)", permissions=["export"])
def export_attendees_xlsx(modeladmin, request, queryset):
    return _action(request, queryset, "xlsx")
