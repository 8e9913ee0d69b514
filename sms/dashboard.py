"""The SMS panel of the event dashboard: outgoing SMS of the event by state, failed ones as an
alert (one grouped query, reading the event's rows only). Registered in SmsConfig.ready()."""

from __future__ import annotations

from django.db.models import Count, Q
from django.urls import reverse

from events.admin.extensions import (
    AdminSection,
    Alert,
    DashboardPanel,
    Figure,
    PanelData,
    register_admin_section,
    register_dashboard_panel,
)
from events.read import selectors
from sms.models import SmsOutbox, SmsState


def sms_panel(event) -> PanelData:
    # The event's rows, read through their keys' indexes (events.read.selectors.outbox_of_event).
    counts = (
        selectors.outbox_of_event(SmsOutbox.objects.all(), event.pk)
        .order_by()
        .aggregate(
            queued=Count("pk", filter=Q(state=SmsState.QUEUED)),
            sent=Count("pk", filter=Q(state=SmsState.SENT)),
            failed=Count("pk", filter=Q(state=SmsState.FAILED)),
        )
    )
    alerts = []
    if counts["failed"]:
        url = (
            reverse("admin:sms_smsoutbox_changelist")
            + f"?event={event.pk}&state__exact={SmsState.FAILED}"
        )
        alerts.append(Alert(f"{counts['failed']} SMS of this event failed", url, counts["failed"]))
    return PanelData(
        figures=[
            Figure("SMS queued", counts["queued"]),
            Figure("SMS sent", counts["sent"]),
            Figure("SMS failed", counts["failed"]),
        ],
        alerts=alerts,
    )


def register() -> None:
    register_dashboard_panel(DashboardPanel(name="sms", title="SMS", build=sms_panel, order=150))
    register_admin_section(AdminSection(app_label="sms", models={"smsoutbox": "Communication"}))
