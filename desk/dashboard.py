"""The desk panel of the event dashboard: the door's counters (from the seat ledger, as the
scanner shows them), the offline conflicts as an alert linked to their list, and a link to the
scanner page. Registered in DeskConfig.ready()."""

from __future__ import annotations

from django.urls import reverse

from desk.models import OfflineConflict
from desk.selectors import counters
from events.admin.extensions import (
    AdminSection,
    Alert,
    DashboardPanel,
    Figure,
    PanelData,
    register_admin_section,
    register_dashboard_panel,
)


def desk_panel(event) -> PanelData:
    numbers = counters(event=event)
    conflicts = OfflineConflict.objects.filter(event_id=event.pk).count()
    scanner = reverse("desk:scanner", args=[event.pk])
    alerts = []
    if conflicts:
        url = reverse("admin:desk_offlineconflict_changelist") + f"?event__id__exact={event.pk}"
        alerts.append(
            Alert(
                f"{conflicts} ticket(s) admitted offline that the server had already decided "
                "otherwise: check them",
                url,
                conflicts,
            )
        )
    return PanelData(
        figures=[
            Figure("Checked in at the door", numbers["attended"]),
            Figure("Expected at the door", numbers["expected"]),
            Figure("Offline conflicts", conflicts),
        ],
        alerts=alerts,
        links=[Alert("Open the door scanner", scanner)],
    )


def register() -> None:
    register_dashboard_panel(DashboardPanel(name="desk", title="Desk", build=desk_panel, order=50))
    register_admin_section(AdminSection(app_label="desk", models={"offlineconflict": "Attendees"}))
