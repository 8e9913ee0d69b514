"""The Event admin's extension point (events.admin.extensions): an overlay's inline, column,
action and read-only field show on the Event admin without core importing the overlay."""

from __future__ import annotations

import pytest
from django.contrib import admin

from events.admin.base import ReadOnlyInline
from events.admin.extensions import (
    EventAdminExtension,
    register_event_extension,
    unregister_event_extension,
)
from events.models import Event, SeatLedger
from tests.events import factories


class LedgerInline(ReadOnlyInline):
    model = SeatLedger
    fields = ("slot", "ticket", "reserved", "used")
    readonly_fields = fields
    verbose_name_plural = "overlay ledger rows"


@admin.display(description="overlay column")
def overlay_column(event: Event) -> str:
    return f"col-{event.pk}"


@admin.display(description="overlay field")
def overlay_field(event: Event) -> str:
    return f"field-{event.pk}"


CALLED: list[int] = []


@admin.action(description="Overlay action")
def overlay_action(modeladmin, request, queryset):
    CALLED.extend(queryset.values_list("pk", flat=True))


@pytest.fixture
def extension():
    register_event_extension(
        EventAdminExtension(
            name="test-overlay",
            inlines=(LedgerInline,),
            list_display=(overlay_column,),
            readonly_fields=(overlay_field,),
            actions=(overlay_action,),
        )
    )
    yield
    unregister_event_extension("test-overlay")


@pytest.mark.django_db
def test_a_registered_extension_shows_on_the_event_admin(extension, admin_client):
    event = factories.EventFactory()
    factories.RegistrationFactory(event=event)  # a ledger row for the inline

    changelist = admin_client.get("/admin/events/event/").content.decode()
    change = admin_client.get(f"/admin/events/event/{event.pk}/change/").content.decode()
    CALLED.clear()
    admin_client.post(
        "/admin/events/event/", {"action": "overlay_action", "_selected_action": [event.pk]}
    )

    assert "column-overlay_column" in changelist and f"col-{event.pk}" in changelist
    assert '<option value="overlay_action">Overlay action</option>' in changelist
    assert "overlay ledger rows" in change.lower()
    assert "Overlays</h2>" in change and f"field-{event.pk}" in change
    assert CALLED == [event.pk]


@pytest.mark.django_db
def test_without_extensions_the_event_admin_shows_none_of_it(admin_client, monkeypatch):
    from events.admin import extensions

    monkeypatch.setattr(extensions, "_extensions", {})  # the installed overlays' too
    event = factories.EventFactory()

    changelist = admin_client.get("/admin/events/event/").content.decode()
    change = admin_client.get(f"/admin/events/event/{event.pk}/change/").content.decode()

    assert "column-overlay_column" not in changelist and "overlay_action" not in changelist
    assert "column-booth_counts" not in changelist  # an installed overlay's column, gone too
    assert "Overlays</h2>" not in change and "overlay ledger rows" not in change.lower()
