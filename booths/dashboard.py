"""The booths panel of the event dashboard (events.admin.extensions): booked / free booths.

One grouped query per event (booths.selectors.booth_counts); registered in BoothsConfig.ready().
"""

from __future__ import annotations

from django.urls import reverse

from booths.models import BoothState
from booths.selectors import booth_counts
from events.admin.extensions import (
    AdminSection,
    Alert,
    DashboardPanel,
    Figure,
    PanelData,
    register_admin_section,
    register_dashboard_panel,
)


def booth_panel(event) -> PanelData:
    counts = booth_counts(event_ids=[event.pk])[event.pk]
    if not counts.total:
        return PanelData(figures=[Figure("Booths", "none")])
    url = reverse("admin:booths_booth_changelist") + f"?event__id__exact={event.pk}"
    free = f"{url}&state__exact={BoothState.AVAILABLE}"
    return PanelData(
        figures=[
            Figure("Booked / unavailable", counts.total - counts.available),
            Figure("Free", counts.available),
            Figure("Total", counts.total),
        ],
        alerts=[] if counts.available else [Alert("Every booth is taken", free, 0)],
    )


def register() -> None:
    register_dashboard_panel(DashboardPanel(name="booths", title="Booths", build=booth_panel))
    register_admin_section(
        AdminSection(
            app_label="booths",
            models={
                "booth": "Booths",
                "boothbooking": "Booths",
                "boothcategory": "Booths",
                "typebooth": "Booths",
            },
        )
    )
