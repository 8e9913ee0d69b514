"""The inbox in the admin: read only, filtered by status / type / order, with a replay action
that calls `seams.services.replay` and reports each outcome as a message (spec-overlay.md §1.5).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.html import format_html

from events.admin.base import ReadOnlyAdmin, run_verb
from seams import messages as seam_messages
from seams.models import InboxStatus, SeamInbox, SeamOrder
from seams.services import replay


class TypeFilter(admin.SimpleListFilter):
    """The message types the seam accepts (`seams.messages.TYPES`), without reading the inbox."""

    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [(kind, kind) for kind in seam_messages.TYPES]

    def queryset(self, request, queryset):
        kind = self.value()
        return queryset.filter(type=kind) if kind else queryset


@admin.register(SeamInbox)
class SeamInboxAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "received_at",
        "type",
        "message_id",
        "order_link",
        "status",
        "error_code",
        "applied_at",
    )
    # The inbox keeps every message the host sent: fixed choices for the date and the type
    # (where a date hierarchy or a field filter reads every row on each load; the one source,
    # receive.SOURCE, needs no filter), only the filtered rows counted, no per-choice counts.
    list_filter = ("status", TypeFilter, ("received_at", admin.DateFieldListFilter))
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # `?order_ref=SO042` (the order column links to it) filters by order; search finds by prefix.
    search_fields = ("message_id", "order_ref")
    readonly_fields = [f.name for f in SeamInbox._meta.fields]
    actions = ("replay_messages",)

    @admin.display(description="order", ordering="order_ref")
    def order_link(self, obj: SeamInbox):
        if not obj.order_ref:
            return "—"
        return format_html('<a href="?order_ref={}">{}</a>', obj.order_ref, obj.order_ref)

    def lookup_allowed(self, lookup, value, request=None):
        return lookup == "order_ref" or super().lookup_allowed(lookup, value, request)

    def has_replay_permission(self, request) -> bool:
        return request.user.has_perm("seams.change_seaminbox")

    @admin.action(description="Replay the selected parked messages", permissions=["replay"])
    def replay_messages(self, request, queryset):
        def verb(row: SeamInbox) -> None:
            was = row.status
            result = replay(inbox_id=row.pk, actor=request.user)
            if was != InboxStatus.PARKED:
                self.message_user(
                    request,
                    f"#{row.pk}: not parked ({was}); nothing to replay.",
                    messages.WARNING,
                )
            elif result.status == InboxStatus.PARKED:
                error = result.payload["error"]
                self.message_user(
                    request,
                    f"#{row.pk}: still parked — {error['code']}: {error['message']}",
                    messages.ERROR,
                )
            else:
                self.message_user(request, f"#{row.pk}: {result.status}.", messages.SUCCESS)

        run_verb(self, request, queryset.order_by("pk"), verb, "Replay run")


@admin.register(SeamOrder)
class SeamOrderAdmin(ReadOnlyAdmin):
    list_display = ("order_ref", "version", "state")
    search_fields = ("order_ref",)
    readonly_fields = ("order_ref", "version", "state")
