"""The desk panel of the event dashboard: the door's counters (from the seat ledger, as the
scanner shows them) and a link to the scanner page. Registered in DeskConfig.ready()."""

from __future__ import annotations

from django.urls import reverse

from desk.selectors import counters
from events.admin.extensions import (
    Alert,
    DashboardPanel,
    Figure,
    PanelData,
    register_dashboard_panel,
)


def desk_panel(event) -> PanelData:
    numbers = counters(event=event)
    scanner = reverse("desk:scanner", args=[event.pk])
    return PanelData(
        figures=[
            Figure("Checked in at the door", numbers["attended"]),
            Figure("Expected at the door", numbers["expected"]),
        ],
        links=[Alert("Open the door scanner", scanner)],
    )


def register() -> None:
    register_dashboard_panel(DashboardPanel(name="desk", title="Desk", build=desk_panel, order=50))
