"""The host-seam panel of the event dashboard: parked inbox messages, as an alert linking to
the inbox filtered on them, and the outbound webhook endpoints that serve the event (its own
and the global ones): how many deliveries wait or were refused, and an alert for each endpoint
disabled after a run of failures. Inbox messages name orders, not events, so that count is
site-wide (said on the page). Registered in SeamsConfig.ready()."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
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
from seams.models import DeliveryState, InboxStatus, SeamInbox, WebhookDelivery, WebhookEndpoint


def deliveries_in_state(state: str):
    """The endpoint's deliveries in `state`, counted through the state's partial index."""
    counted = (
        WebhookDelivery.objects.filter(endpoint=OuterRef("pk"), state=state)
        .order_by()
        .values("endpoint")
        .annotate(n=Count("*"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def seam_panel(event) -> PanelData:
    parked = SeamInbox.objects.filter(status=InboxStatus.PARKED).count()
    url = reverse("admin:seams_seaminbox_changelist") + f"?status__exact={InboxStatus.PARKED}"
    alerts = [Alert(f"{parked} parked host message(s) (all events)", url, parked)] if parked else []
    endpoints = list(
        WebhookEndpoint.objects.filter(Q(event=None) | Q(event=event.pk))
        .annotate(
            waiting=deliveries_in_state(DeliveryState.PENDING),
            refused=deliveries_in_state(DeliveryState.FAILED),
        )
        .values("pk", "name", "enabled", "disabled_reason", "waiting", "refused")
        .order_by("name", "pk")
    )
    waiting = sum(e["waiting"] for e in endpoints)
    refused = sum(e["refused"] for e in endpoints)
    disabled = [e for e in endpoints if not e["enabled"]]
    for e in disabled:
        alerts.append(
            Alert(
                f"Webhook endpoint “{e['name']}” is disabled "
                f"({(e['disabled_reason'] or 'by staff').rstrip('.')}): "
                f"{e['waiting']} message(s) wait for it",
                reverse("admin:seams_webhookendpoint_change", args=[e["pk"]]),
                e["waiting"],
            )
        )
    if refused:
        alerts.append(
            Alert(
                f"{refused} webhook delivery(ies) refused by the receiver",
                reverse("admin:seams_webhookdelivery_changelist")
                + f"?state__exact={DeliveryState.FAILED}",
                refused,
            )
        )
    return PanelData(
        figures=[
            Figure("Parked messages (all events)", parked),
            Figure(
                "Webhook endpoints (disabled)",
                f"{len(endpoints)} ({len(disabled)})" if endpoints else "none",
            ),
            Figure("Webhook deliveries waiting", waiting),
        ],
        alerts=alerts,
    )


def register() -> None:
    register_dashboard_panel(
        DashboardPanel(name="seams", title="Host integration", build=seam_panel, order=200)
    )
    register_admin_section(
        AdminSection(
            app_label="seams",
            models={
                "seaminbox": "Host integration",
                "seamorder": "Host integration",
                "webhookendpoint": "Host integration",
                "webhookdelivery": "Host integration",
            },
            internal=frozenset({"seamorder"}),
        )
    )
