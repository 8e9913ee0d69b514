"""The desk's conflicts in the admin: read-only rows (only the scan writes them), filtered by
event, answer and date; the Event change page links to its event's list."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from desk.models import OfflineConflict
from events.admin.base import ReadOnlyAdmin
from events.admin.extensions import EventAdminExtension


@admin.register(OfflineConflict)
class OfflineConflictAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "event",
        "registration",
        "server_status",
        "offline_actor_label",
        "offline_scanned_at",
        "kept_actor_label",
        "kept_at",
        "snapshot_at",
    )
    list_filter = ("server_status", "event", "created_at")
    list_select_related = ("event", "registration")
    search_fields = ("registration__name", "offline_actor_label", "kept_actor_label")
    readonly_fields = [f.name for f in OfflineConflict._meta.fields]
    date_hierarchy = "created_at"


@admin.display(description="desk conflicts")
def event_conflicts(event) -> str:
    if event.pk is None:
        return "—"
    count = OfflineConflict.objects.filter(event_id=event.pk).count()
    url = reverse("admin:desk_offlineconflict_changelist") + f"?event__id__exact={event.pk}"
    return format_html('<a href="{}">{} offline conflict(s) at the door</a>', url, count)


EVENT_EXTENSION = EventAdminExtension(name="desk", readonly_fields=(event_conflicts,))
