"""Staff surface of the booths overlay (spec-overlay.md §2, spec.md §9): thin; every write
calls a booths service and a typed refusal becomes an admin message, never a 500.

- Booths: per event, with state, renter and booking history; created, edited and deleted by
  `create_booth` / `update_booth` / `delete_booth` (the §2.2 fences); actions block / release.
- Bookings: the history, read only; "add" is the staff's booking request (a quotation's hold,
  `request_booking`); actions confirm / release / cancel call the booking verbs.
- Categories and template lines (`TypeBooth`, per event type): config rows through their verbs.
- The Event admin gets a booths inline, a "booths" column (free / total) and a summary field
  through the core's extension point (registered in `BoothsConfig.ready()`).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.utils.html import format_html

from booths import selectors
from booths.models import Booth, BoothBooking, BoothCategory, TypeBooth
from booths.services import bookings, config
from booths.services import booths as booth_services
from events.admin.base import (
    ReadOnlyInline,
    RowVerbs,
    ServiceAdmin,
    ServiceErrorsMixin,
    ServiceInline,
    delete_each,
    form_fields,
    run_verb,
)
from events.admin.extensions import EventAdminExtension

RENTER = ("partner_ref", "contact_name", "contact_email", "contact_phone")


def _refresh(obj, row) -> None:
    """Show the row a verb wrote on the admin's instance (the admin redirects to its pk)."""
    obj.pk = row.pk
    obj.__dict__.update({k: v for k, v in row.__dict__.items() if not k.startswith("_")})


# --- the Event admin's additions ------------------------------------------------------------

BOOTH_ROWS = RowVerbs(
    create=lambda event, actor, fields: booth_services.create_booth(
        event=event, actor=actor, **fields
    ),
    update=lambda booth, actor, fields: booth_services.update_booth(
        booth=booth, actor=actor, **fields
    ),
    delete=lambda booth, actor: booth_services.delete_booth(booth=booth, actor=actor),
)


class EventBoothInline(ServiceInline):
    """The event's booths: name and category editable (through the booth verbs), the rest is
    the booking's business."""

    model = Booth
    fk_name = "event"
    verbs = BOOTH_ROWS
    fields = ("name", "booth_category", "state", "partner_ref", "contact_name", "is_paid")
    readonly_fields = ("state", "partner_ref", "contact_name", "is_paid")
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("booth_category")


def prefetch_booth_counts(events) -> None:
    """One query for the changelist's page of events; each event keeps its counts on itself."""
    counts = selectors.booth_counts(event_ids=[e.pk for e in events])
    for event in events:
        event._booth_counts = counts[event.pk]


def _counts(event) -> selectors.BoothCounts:
    counts = getattr(event, "_booth_counts", None)
    if counts is None:
        counts = event._booth_counts = selectors.booth_counts(event_ids=[event.pk])[event.pk]
    return counts


@admin.display(description="booths (free / total)")
def booth_counts(event) -> str:
    return str(_counts(event))


@admin.display(description="booths")
def booth_summary(event) -> str:
    if event.pk is None:
        return "—"
    counts = _counts(event)
    return format_html(
        "total {} · available {} · booked {}",
        counts.total,
        counts.available,
        counts.total - counts.available,
    )


EVENT_EXTENSION = EventAdminExtension(
    name="booths",
    inlines=(EventBoothInline,),
    list_display=(booth_counts,),
    readonly_fields=(booth_summary,),
    prefetch=prefetch_booth_counts,
)


# --- categories and template lines ----------------------------------------------------------


@admin.register(BoothCategory)
class BoothCategoryAdmin(ServiceAdmin):
    list_display = ("name", "sequence", "price", "product_ref", "active")
    list_filter = ("active",)
    search_fields = ("name", "product_ref")

    def save_model(self, request, obj, form, change):
        if change:
            row = config.update_booth_category(
                category=obj, actor=request.user, **form_fields(form, changed_only=True)
            )
        else:
            row = config.create_booth_category(
                actor=request.user, **form_fields(form, changed_only=False)
            )
        _refresh(obj, row)

    def delete_model(self, request, obj):
        config.delete_booth_category(category=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda c: config.delete_booth_category(category=c, actor=request.user),
        )


@admin.register(TypeBooth)
class TypeBoothAdmin(ServiceAdmin):
    """Template booth lines, per event type: copied once onto each new event of the type."""

    list_display = ("name", "event_type", "booth_category")
    list_filter = ("event_type", "booth_category")
    list_select_related = ("event_type", "booth_category")
    search_fields = ("name", "event_type__name")

    def get_readonly_fields(self, request, obj=None):
        return ("event_type",) if obj is not None else ()

    def save_model(self, request, obj, form, change):
        if change:
            row = config.update_type_booth(
                line=obj, actor=request.user, **form_fields(form, changed_only=True)
            )
        else:
            fields = form_fields(form, changed_only=False)
            event_type = fields.pop("event_type")
            row = config.create_type_booth(event_type=event_type, actor=request.user, **fields)
        _refresh(obj, row)

    def delete_model(self, request, obj):
        config.delete_type_booth(line=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda t: config.delete_type_booth(line=t, actor=request.user)
        )


# --- booths and their bookings --------------------------------------------------------------


class BookingHistoryInline(ReadOnlyInline):
    model = BoothBooking
    fields = (
        "order_ref",
        "order_line_ref",
        "partner_ref",
        "contact_name",
        "state",
        "created_at",
        "decided_at",
    )
    readonly_fields = fields
    ordering = ("-created_at", "-pk")


class BookingVerbs:
    """Actions that change bookings: allowed to whoever may change bookings (Event user and
    manager), though the rows themselves are never edited by hand."""

    def has_book_permission(self, request) -> bool:
        return request.user.has_perm("booths.change_boothbooking")


@admin.register(Booth)
class BoothAdmin(BookingVerbs, ServiceAdmin):
    list_display = (
        "name",
        "event",
        "booth_category",
        "state",
        "partner_ref",
        "contact_name",
        "order_ref",
        "is_paid",
    )
    list_filter = ("state", "is_paid", "booth_category", "event")
    search_fields = ("name", "event__name", "partner_ref", "contact_name", "order_ref")
    list_select_related = ("event", "booth_category")
    fields = (
        "event",
        "booth_category",
        "name",
        "state",
        *RENTER,
        "order_ref",
        "order_line_ref",
        "is_paid",
    )
    readonly_fields = ("state", *RENTER, "order_ref", "order_line_ref", "is_paid")
    inlines = [BookingHistoryInline]
    actions = ["block", "release"]

    def get_queryset(self, request):
        return selectors.booth_list()

    def save_model(self, request, obj, form, change):
        if change:
            row = booth_services.update_booth(
                booth=obj, actor=request.user, **form_fields(form, changed_only=True)
            )
        else:
            fields = form_fields(form, changed_only=False)
            row = booth_services.create_booth(actor=request.user, **fields)
        _refresh(obj, row)

    def get_deleted_objects(self, objs, request):
        """A booth's booking history goes with it (the `delete_booth` verb decides, under its
        fences); bookings being read-only rows must not make the delete page refuse."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(BoothBooking._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        booth_services.delete_booth(booth=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda b: booth_services.delete_booth(booth=b, actor=request.user),
        )

    @admin.action(description="Block by staff (take off sale)", permissions=["book"])
    def block(self, request, queryset: QuerySet[Booth]):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda b: bookings.block_booth(booth=b, actor=request.user),
            "Blocked",
        )

    @admin.action(description="Release the booking (booth back to available)", permissions=["book"])
    def release(self, request, queryset: QuerySet[Booth]):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda b: bookings.release_booth(booth=b, actor=request.user),
            "Released",
        )


class BookingRequestForm(forms.ModelForm):
    """What staff type to request a booth for a host order; `request_booking` decides."""

    class Meta:
        model = BoothBooking
        fields = (
            "booth",
            "order_ref",
            "order_line_ref",
            "partner_ref",
            "contact_name",
            "contact_email",
            "contact_phone",
        )


@admin.register(BoothBooking)
class BoothBookingAdmin(BookingVerbs, ServiceErrorsMixin, admin.ModelAdmin):
    """Booking rows are written by the booking verbs only: the add page requests one
    (`request_booking`; a refusal such as `booth_unavailable` is an error message and nothing
    is written), existing rows are read only and change through the actions."""

    list_display = (
        "booth",
        "event",
        "order_ref",
        "partner_ref",
        "contact_name",
        "state",
        "created_at",
        "decided_at",
    )
    list_filter = ("state", "booth__event")
    search_fields = ("order_ref", "partner_ref", "contact_name", "booth__name")
    list_select_related = ("booth", "booth__event")
    actions = ["confirm", "release", "cancel"]
    form = BookingRequestForm
    autocomplete_fields = ("booth",)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return (*BookingRequestForm.Meta.fields, "state", "created_at", "decided_at")

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        row = bookings.request_booking(
            booth=data["booth"],
            order_ref=data["order_ref"],
            order_line_ref=data["order_line_ref"],
            partner_ref=data["partner_ref"],
            contact={
                "name": data["contact_name"],
                "email": data["contact_email"],
                "phone": data["contact_phone"],
            },
            actor=request.user,
        )
        _refresh(obj, row)

    @admin.display(description="event", ordering="booth__event")
    def event(self, obj: BoothBooking):
        return obj.booth.event

    @admin.action(description="Confirm (cancels the booth's other requests)", permissions=["book"])
    def confirm(self, request, queryset: QuerySet[BoothBooking]):
        cancelled: list[str] = []

        def verb(booking):
            cancelled.extend(bookings.confirm_booking(booking=booking, actor=request.user))

        run_verb(self, request, queryset.order_by("pk"), verb, "Confirmed")
        if cancelled:
            self.message_user(
                request,
                "Requests of other orders cancelled: " + ", ".join(dict.fromkeys(cancelled)),
                messages.WARNING,
            )

    @admin.action(description="Release (booth back to available)", permissions=["book"])
    def release(self, request, queryset: QuerySet[BoothBooking]):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda b: bookings.release_booking(booking=b, actor=request.user),
            "Released",
        )

    @admin.action(description="Cancel the request", permissions=["book"])
    def cancel(self, request, queryset: QuerySet[BoothBooking]):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda b: bookings.cancel_booking(booking=b, actor=request.user),
            "Cancelled",
        )
