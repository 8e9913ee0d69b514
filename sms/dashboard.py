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
from sms.models import SmsOutbox, SmsState


def sms_panel(event) -> PanelData:
    # The event's rows are those of its registrations and those of its schedulers (either
    # key may have been cleared). Selected as a union of the two, each found through its own
    # index: an OR across the two joins made PostgreSQL read the whole outbox, every event's
    # SMS, on every dashboard load (128 ms at 100,000 rows, growing with the table).
    of_event = SmsOutbox.objects.filter(registration__event_id=event.pk).values("pk")
    of_schedulers = SmsOutbox.objects.filter(scheduler__event_id=event.pk).values("pk")
    counts = (
        SmsOutbox.objects.filter(pk__in=of_event.union(of_schedulers))
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
