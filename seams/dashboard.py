"""The host-seam panel of the event dashboard: parked inbox messages, as an alert linking to
the inbox filtered on them. Inbox messages name orders, not events, so the count is site-wide
(said on the page). Registered in SeamsConfig.ready()."""

from __future__ import annotations

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
from seams.models import InboxStatus, SeamInbox


def seam_panel(event) -> PanelData:
    parked = SeamInbox.objects.filter(status=InboxStatus.PARKED).count()
    url = reverse("admin:seams_seaminbox_changelist") + f"?status__exact={InboxStatus.PARKED}"
    alerts = [Alert(f"{parked} parked host message(s) (all events)", url, parked)] if parked else []
    return PanelData(figures=[Figure("Parked messages (all events)", parked)], alerts=alerts)


def register() -> None:
    register_dashboard_panel(
        DashboardPanel(name="seams", title="Host integration", build=seam_panel, order=200)
    )
    register_admin_section(
        AdminSection(
            app_label="seams",
            models={"seaminbox": "Host integration", "seamorder": "Host integration"},
            internal=frozenset({"seamorder"}),
        )
    )
