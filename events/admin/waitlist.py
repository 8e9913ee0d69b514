"""The waiting list per event: read-only rows, two actions that call the waitlist
verbs (`offer_now`, `remove`); nothing here writes a row itself.

The list is part of the event: whoever may view events sees it (`events.view_event`), whoever
may change events runs its actions (`events.change_event`). Filter it by event (the event
dashboard links to `?event__id__exact=<id>`); the position is the entry's place among the
waiting entries of its (ticket, slot) pair, one correlated count in the changelist's query.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.html import format_html

from events.admin.base import run_verb
from events.models import WaitlistEntry, WaitlistState
from events.services import waitlist


def _position():
    """The entry's 1-based place among its pair's waiting entries (a correlated count; NULL
    ticket / slot columns compare equal through COALESCE)."""
    rows = (
        WaitlistEntry.objects.filter(
            event_id=OuterRef("event_id"), state=WaitlistState.WAITING, pk__lte=OuterRef("pk")
        )
        .annotate(t=Coalesce("ticket_id", 0), s=Coalesce("slot_id", 0))
        .filter(t=Coalesce(OuterRef("ticket_id"), 0), s=Coalesce(OuterRef("slot_id"), 0))
        .order_by()
        .values("event_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Subquery(rows, output_field=IntegerField())


@admin.register(WaitlistEntry)
class WaitlistEntryAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "email",
        "event",
        "pair",
        "place",
        "state",
        "offered_at",
        "expires_at",
        "registration_link",
    )
    list_filter = ("state", ("event", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "email", "event__name")
    list_select_related = ("event", "ticket", "slot", "registration")
    ordering = ("event", "id")
    actions = ["offer_now", "remove"]
    fields = (
        "event",
        "ticket",
        "slot",
        "name",
        "email",
        "state",
        "offered_at",
        "expires_at",
        "offer_version",
        "registration",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_place=_position())

    # The list belongs to the event: the event's permissions decide.
    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("events.view_event")

    def has_add_permission(self, request):
        return False  # people join from the event page (waitlist.join)

    def has_change_permission(self, request, obj=None):
        return False  # rows change through the actions only

    def has_delete_permission(self, request, obj=None):
        return False  # "remove" keeps the row (state removed), for the audit trail

    def has_waitlist_permission(self, request):
        return request.user.has_perm("events.change_event")

    @admin.display(description="ticket / slot")
    def pair(self, obj: WaitlistEntry) -> str:
        parts = [str(p) for p in (obj.ticket, obj.slot) if p is not None]
        return " · ".join(parts) or "—"

    @admin.display(description="position", ordering="_place")
    def place(self, obj: WaitlistEntry):
        return getattr(obj, "_place", None) if obj.state == WaitlistState.WAITING else "—"

    @admin.display(description="registration")
    def registration_link(self, obj: WaitlistEntry):
        if obj.registration_id is None:
            return "—"
        url = reverse("admin:events_registration_change", args=[obj.registration_id])
        return format_html('<a href="{}">{}</a>', url, obj.registration)

    @admin.action(description="Offer a seat now (ahead of the queue)", permissions=["waitlist"])
    def offer_now(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda entry: waitlist.offer_now(entry=entry, actor=request.user),
            "Offers sent",
        )

    @admin.action(description="Remove from the waiting list", permissions=["waitlist"])
    def remove(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda entry: waitlist.remove(entry=entry, actor=request.user),
            "Removed",
        )
