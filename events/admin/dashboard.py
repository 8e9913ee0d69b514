"""The event dashboard: one admin page per event (GET /admin/events/event/<id>/dashboard/).

What it shows: seats taken / available per ticket and per slot, registrations per day
(daily and cumulative), check-in progress, each scheduler's status, failed outbox mails as an
alert, then every panel an overlay registered (`extensions.register_dashboard_panel`: booths,
leads, parked seam messages, failed SMS...). Core never imports an overlay.

Invariants:
- read-only: the page holds no form that writes; anyone who may view the Event sees it (the
  desk group too); edit links and the export buttons show only with the matching permission;
- charts are SVG rendered here by pygal and inlined: no script at all (pygal's inline config
  script is removed by an XML filter, `_no_script`; its CDN script is disabled with `js=[]`),
  so the page reads without JavaScript and under the admin's Content-Security-Policy;
- colour never carries meaning alone: every bar and point prints its value, series are named
  in the legend and the cumulative line is dashed; each chart is followed by the same numbers
  as a table;
- live during the event: from an hour before the start to the end the page reloads itself
  every minute (a meta refresh), so the check-in progress follows the door without a script;
- the query count does not depend on the number of registrations (tests/events/dashboard/
  test_dashboard.py measures it at 10 and 5,000).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from events.admin import exports
from events.admin.extensions import Alert, dashboard_panels
from events.models import OutboxState
from events.read import dashboard as figures


@cache
def _style():
    """High-contrast colours (Okabe-Ito); meaning is carried by labels and values anyway.
    pygal is imported by the first chart drawn, not by every process that loads the admin."""
    from pygal.style import Style

    return Style(
        background="white",
        plot_background="white",
        foreground="#222",
        foreground_strong="#000",
        foreground_subtle="#555",
        colors=("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"),
        value_font_size=15,
        label_font_size=15,
        major_label_font_size=15,
        legend_font_size=16,
        title_font_size=18,
        tooltip_font_size=14,
        font_family="sans-serif",
    )


def _no_script(root):
    """Remove every <script> pygal writes (its inline config): the chart needs none."""
    for parent in list(root.iter()):
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return root


def _config(**kwargs):
    return {
        "js": [],  # no script from a CDN (pygal's default)
        "disable_xml_declaration": True,
        "style": _style(),
        "print_values": True,
        "legend_at_bottom": True,
        "truncate_label": -1,
        "truncate_legend": -1,
        "width": 800,
        **kwargs,
    }


def _render(chart) -> str:
    chart.add_xml_filter(_no_script)
    return chart.render(is_unicode=True)


def seat_chart(title: str, bars: list[figures.SeatBar]) -> str:
    """Stacked horizontal bars: taken, then available (unlimited: no available part)."""
    import pygal

    chart = pygal.HorizontalStackedBar(
        **_config(
            title=title, width=1000, height=max(220, 110 + 48 * len(bars)), print_zeroes=False
        )
    )
    chart.x_labels = [bar.label for bar in bars]
    chart.add("Taken", [bar.taken for bar in bars])
    chart.add(
        "Available",
        [
            {"value": bar.available, "label": "available"} if bar.available is not None else None
            for bar in bars
        ],
    )
    return _render(chart)


def days_chart(days: list[figures.DayCount]) -> str:
    import pygal

    chart = pygal.Line(
        **_config(
            title="Registrations per day",
            width=1000,
            height=400,
            x_label_rotation=30,
            show_minor_x_labels=len(days) <= 14,
            x_labels_major_every=max(1, len(days) // 7),
            dots_size=4,
        )
    )
    chart.x_labels = [d.day.isoformat() for d in days]
    chart.add("Daily", [d.daily for d in days])
    chart.add(
        "Cumulative",
        [d.cumulative for d in days],
        stroke_style={"width": 3, "dasharray": "8, 4"},
    )
    return _render(chart)


def check_in_chart(check_in: figures.CheckIn) -> str:
    import pygal

    chart = pygal.HorizontalBar(**_config(title="Check-in", width=500, height=220))
    chart.x_labels = ["Attendees"]
    chart.add("Expected", [check_in.expected])
    chart.add("Attended", [check_in.attended])
    return _render(chart)


LIVE_BEFORE = timedelta(hours=1)  # the door opens before the start: check-in goes live then
LIVE_REFRESH_SECONDS = 60


def is_live(event, now: datetime | None = None) -> bool:
    """From an hour before the start to the end: the page reloads itself (a plain
    `<meta http-equiv="refresh">`, no script) so the check-in figures stay current."""
    now = now or timezone.now()
    return event.date_begin - LIVE_BEFORE <= now <= event.date_end


def dashboard_view(modeladmin: admin.ModelAdmin, request, object_id: str):
    event = modeladmin.get_object(request, object_id)
    if event is None:
        raise Http404("no such event")
    if not modeladmin.has_view_permission(request, event):
        raise PermissionDenied
    seat = figures.seat_figures(event=event)
    days = figures.registrations_per_day(event=event)
    check_in = figures.check_in(event=event)
    schedulers = figures.communication(event=event)
    failed = figures.failed_mails(event=event)
    alerts = []
    if failed:
        url = (
            reverse("admin:events_mailoutbox_changelist")
            + f"?event={event.pk}&state__exact={OutboxState.FAILED}"
        )
        alerts.append(Alert(f"{failed} outgoing mail(s) of this event failed", url, failed))
    for status in schedulers:
        if status.state == "error":
            url = reverse("admin:events_mail_change", args=[status.scheduler.pk])
            alerts.append(Alert(f"Scheduler “{status.scheduler}” is in error", url, 1))
    panels = []
    for panel in dashboard_panels():
        data = panel.build(event)
        alerts.extend(data.alerts)
        panels.append({"title": panel.title, "name": panel.name, "data": data})
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Dashboard: {event.name}",
        "subtitle": None,
        "opts": opts,
        "original": event,
        "event": event,
        "has_view_permission": True,
        "can_change": modeladmin.has_change_permission(request, event),
        "can_export": exports.can_export(request),
        "states": figures.state_counts(event=event),
        "waitlist": figures.waitlist_figures(event=event),
        "seat": seat,
        "seat_ticket_svg": seat_chart("Seats per ticket", seat.per_ticket)
        if seat.per_ticket
        else "",
        "seat_slot_svg": seat_chart("Seats per slot", seat.per_slot) if seat.per_slot else "",
        "days": days,
        "days_svg": days_chart(days) if days else "",
        "check_in": check_in,
        "check_in_svg": check_in_chart(check_in),
        "schedulers": schedulers,
        "alerts": alerts,
        "panels": panels,
        "live": is_live(event),
        "refresh_seconds": LIVE_REFRESH_SECONDS,
    }
    return TemplateResponse(request, "admin/events/event/dashboard.html", context)
