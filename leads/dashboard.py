"""The leads panel of the event dashboard: leads created for the event (one grouped query);
registered in LeadsConfig.ready()."""

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
from leads.models import LeadRequest
from leads.selectors import lead_counts


def lead_panel(event) -> PanelData:
    created = lead_counts([event.pk])[event.pk]
    request = LeadRequest.objects.filter(event_id=event.pk).only("pk", "error_message").first()
    alerts = []
    if request is not None and request.error_message:
        url = reverse("admin:leads_leadrequest_change", args=[request.pk])
        alerts.append(Alert(f"Lead generation is in error: {request.error_message[:80]}", url, 1))
    return PanelData(figures=[Figure("Leads created", created)], alerts=alerts)


def register() -> None:
    register_dashboard_panel(DashboardPanel(name="leads", title="Leads", build=lead_panel))
    register_admin_section(
        AdminSection(
            app_label="leads",
            models={
                "lead": "Leads",
                "leadrule": "Leads",
                "leadrulepredicate": "Leads",
                "leadrequest": "Leads",
                "leadprovenance": "Leads",
                "leadprovenanceregistration": "Leads",
            },
            internal=frozenset({"leadprovenanceregistration", "leadrequest"}),
        )
    )
