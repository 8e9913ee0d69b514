"""Staff surface (spec.md §9): a thin admin; every change of state calls a service."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.utils.html import format_html

from events.admin_utils import ServiceErrorsMixin, run_verb
from events.models import (
    Event,
    EventAuditLog,
    EventType,
    LinkedProduct,
    Mail,
    MailOutbox,
    MailRegistration,
    MailSlot,
    MessageTemplate,
    Question,
    QuestionChoice,
    Registration,
    RegistrationAnswer,
    Slot,
    Stage,
    Tag,
    TagCategory,
    Ticket,
    TypeMail,
)
from events.services import events as event_services
from events.services import registrations as registration_services
from events.services import seats


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# --- reference data ------------------------------------------------------------------------


@admin.register(Stage)
class StageAdmin(admin.ModelAdmin):
    list_display = ("name", "sequence", "fold", "pipe_end")
    list_editable = ("sequence",)
    ordering = ("sequence",)


class TagInline(admin.TabularInline):
    model = Tag
    extra = 0


@admin.register(TagCategory)
class TagCategoryAdmin(admin.ModelAdmin):
    list_display = ("name", "sequence")
    inlines = [TagInline]
    search_fields = ("name",)


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    list_display = ("name", "category", "color", "sequence")
    list_filter = ("category",)
    search_fields = ("name", "category__name")


class TypeTicketInline(admin.TabularInline):
    model = Ticket
    fk_name = "event_type"
    extra = 0
    fields = ("name", "sequence", "seats_max", "price", "product_ref", "limit_max_per_order")


class TypeQuestionInline(admin.TabularInline):
    model = Question
    fk_name = "event_type"
    extra = 0
    fields = ("title", "question_type", "is_mandatory_answer", "once_per_order", "sequence")
    show_change_link = True


class TypeMailInline(admin.TabularInline):
    model = TypeMail
    extra = 0


@admin.register(EventType)
class EventTypeAdmin(admin.ModelAdmin):
    list_display = ("name", "sequence", "has_seats_limitation", "seats_max", "default_timezone")
    search_fields = ("name",)
    filter_horizontal = ("tags",)
    inlines = [TypeTicketInline, TypeQuestionInline, TypeMailInline]


# --- events ---------------------------------------------------------------------------------


class TicketInline(admin.TabularInline):
    model = Ticket
    fk_name = "event"
    extra = 0
    fields = (
        "name",
        "sequence",
        "seats_max",
        "price",
        "product_ref",
        "limit_max_per_order",
        "start_sale_datetime",
        "end_sale_datetime",
    )


class SlotInline(admin.TabularInline):
    model = Slot
    extra = 0
    fields = ("date", "start_hour", "end_hour", "start_datetime", "end_datetime")
    readonly_fields = ("date", "start_hour", "end_hour", "start_datetime", "end_datetime")
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # slots are added through the add_slot service (dates in the event tz)


class QuestionInline(admin.TabularInline):
    model = Question
    fk_name = "event"
    extra = 0
    fields = (
        "title",
        "question_type",
        "is_mandatory_answer",
        "once_per_order",
        "sequence",
        "active",
    )
    show_change_link = True


class MailInline(ReadOnlyInline):
    model = Mail
    fields = (
        "template_ref",
        "notification_type",
        "interval_nbr",
        "interval_unit",
        "interval_type",
        "scheduled_date",
        "state",
        "mail_count_done",
        "error_message",
    )
    readonly_fields = fields

    @admin.display(description="state")
    def state(self, obj: Mail) -> str:
        return obj.mail_state


@admin.register(Event)
class EventAdmin(ServiceErrorsMixin, admin.ModelAdmin):
    list_display = (
        "name",
        "date_begin",
        "date_end",
        "stage",
        "kanban_state",
        "is_published",
        "seats_reserved",
        "seats_used",
        "seats_available",
    )
    list_filter = (
        "stage",
        "kanban_state",
        "is_published",
        "is_multi_slots",
        "event_type",
        "active",
        "tags",
    )
    search_fields = ("name", "venue", "organizer")
    date_hierarchy = "date_begin"
    filter_horizontal = ("tags",)
    list_select_related = ("stage",)
    readonly_fields = (
        "kanban_state",
        "is_published",
        "ics_sequence",
        "created_at",
        "updated_at",
        "seat_summary",
    )
    inlines = [TicketInline, SlotInline, QuestionInline, MailInline]
    actions = ["publish", "unpublish", "mark_done", "cancel_event"]
    fieldsets = (
        (None, {"fields": ("name", "event_type", "stage", "kanban_state", "is_published", "tags")}),
        ("When", {"fields": ("date_begin", "date_end", "date_tz", "is_multi_slots")}),
        ("Seats", {"fields": ("seats_limited", "seats_max", "seat_summary")}),
        ("Where", {"fields": ("venue", "address", "country", "organizer")}),
        ("Texts", {"fields": ("description", "ticket_instructions", "note", "lang", "currency")}),
        (
            "System",
            {
                "fields": ("active", "ics_sequence", "created_at", "updated_at"),
                "classes": ("collapse",),
            },
        ),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("stage", "event_type")

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        cl = getattr(response, "context_data", {}).get("cl")
        if cl is not None:
            self._summaries = seats.summaries(cl.result_list)
        return response

    def _summary(self, obj: Event) -> seats.SeatSummary:
        cache = getattr(self, "_summaries", None) or {}
        if obj.pk not in cache:
            cache = seats.summaries([obj])
        return cache[obj.pk]

    @admin.display(description="reserved")
    def seats_reserved(self, obj):
        return self._summary(obj).reserved

    @admin.display(description="used")
    def seats_used(self, obj):
        return self._summary(obj).used

    @admin.display(description="available")
    def seats_available(self, obj):
        available = self._summary(obj).available
        return "∞" if available is None else available

    @admin.display(description="seats")
    def seat_summary(self, obj):
        if obj.pk is None:
            return "—"
        s = seats.event_summary(event=obj)
        limit = "unlimited" if s.max is None else s.max
        return format_html(
            "reserved {} · used {} · taken {} · max {} · available {}",
            s.reserved,
            s.used,
            s.taken,
            limit,
            "∞" if s.available is None else s.available,
        )

    def save_model(self, request, obj, form, change):
        """Forward to the event services: creation applies the template once, edits audit."""
        data = {f: form.cleaned_data[f] for f in form.changed_data if f in form.cleaned_data}
        tags = data.pop("tags", None)
        if change:
            event = event_services.update_event(event=obj, actor=request.user, **data)
        else:
            for f in ("name", "date_begin", "date_end", "date_tz", "event_type"):
                data.pop(f, None)
            event = event_services.create_event(
                name=obj.name,
                date_begin=obj.date_begin,
                date_end=obj.date_end,
                date_tz=obj.date_tz,
                event_type=obj.event_type,
                actor=request.user,
                **data,
            )
        obj.pk = event.pk
        obj.__dict__.update({k: v for k, v in event.__dict__.items() if not k.startswith("_")})
        if tags is not None:
            event.tags.set(tags)

    def save_related(self, request, form, formsets, change):
        form.save_m2m = lambda: None  # tags were set by save_model through the service
        super().save_related(request, form, formsets, change)

    @admin.action(description="Publish", permissions=["change"])
    def publish(self, request, queryset: QuerySet[Event]):
        run_verb(
            self,
            request,
            queryset,
            lambda e: event_services.publish(event=e, actor=request.user),
            "Published",
        )

    @admin.action(description="Unpublish", permissions=["change"])
    def unpublish(self, request, queryset):
        run_verb(
            self,
            request,
            queryset,
            lambda e: event_services.unpublish(event=e, actor=request.user),
            "Unpublished",
        )

    @admin.action(description="Mark as done", permissions=["change"])
    def mark_done(self, request, queryset):
        run_verb(
            self,
            request,
            queryset,
            lambda e: event_services.mark_done(event=e, actor=request.user),
            "Marked done",
        )

    @admin.action(description="Cancel the event", permissions=["change"])
    def cancel_event(self, request, queryset):
        run_verb(
            self,
            request,
            queryset,
            lambda e: event_services.cancel_event(event=e, actor=request.user),
            "Cancelled",
        )


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "event",
        "event_type",
        "price",
        "seats_max",
        "start_sale_datetime",
        "end_sale_datetime",
    )
    list_filter = ("event_type",)
    search_fields = ("name", "event__name", "product_ref")
    list_select_related = ("event", "event_type")
    autocomplete_fields = ("event",)


@admin.register(Slot)
class SlotAdmin(admin.ModelAdmin):
    list_display = ("__str__", "event", "start_datetime", "end_datetime")
    search_fields = ("event__name",)
    list_select_related = ("event",)
    readonly_fields = ("start_datetime", "end_datetime")

    def has_add_permission(self, request):
        return False  # through add_slot (dates computed in the event's timezone)


class QuestionChoiceInline(admin.TabularInline):
    model = QuestionChoice
    extra = 0


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = (
        "title",
        "event",
        "event_type",
        "question_type",
        "is_mandatory_answer",
        "once_per_order",
        "active",
    )
    list_filter = ("question_type", "is_mandatory_answer", "active")
    search_fields = ("title", "event__name")
    list_select_related = ("event", "event_type")
    inlines = [QuestionChoiceInline]


# --- registrations ---------------------------------------------------------------------------


class AnswerInline(ReadOnlyInline):
    model = RegistrationAnswer
    fields = ("question", "choice", "text_value")
    readonly_fields = fields


class MailRowInline(ReadOnlyInline):
    model = MailRegistration
    fields = ("scheduler", "scheduled_date", "mail_sent", "sent_at", "outcome")
    readonly_fields = fields


@admin.register(Registration)
class RegistrationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "email",
        "event",
        "ticket",
        "slot",
        "state",
        "sale_status",
        "is_paid",
        "barcode",
        "created_at",
    )
    list_filter = ("state", "sale_status", "is_paid", "active", "contact_source", "event")
    search_fields = (
        "name",
        "email",
        "phone",
        "barcode",
        "partner_ref",
        "sale_order_ref",
        "company_name",
    )
    list_select_related = ("event", "ticket", "slot")
    readonly_fields = (
        "event",
        "ticket",
        "slot",
        "state",
        "active",
        "barcode",
        "partner_ref",
        "contact_source",
        "sale_order_ref",
        "sale_order_line_ref",
        "sale_status",
        "is_paid",
        "utm_source",
        "utm_medium",
        "utm_campaign",
        "confirmed_at",
        "date_closed",
        "token_version",
        "created_at",
        "updated_at",
        "name",
        "email",
        "phone",
        "company_name",
    )
    inlines = [AnswerInline, MailRowInline]
    actions = [
        "confirm",
        "cancel",
        "mark_attended",
        "undo_attendance",
        "reset_to_draft",
        "archive",
        "unarchive",
    ]

    def has_add_permission(self, request):
        return False  # registrations are created through the register service (intake, seam)

    def has_delete_permission(self, request, obj=None):
        return False  # archive instead: a registration is history

    def _verb(self, request, queryset, verb, done):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda r: verb(registration=r, actor=request.user),
            done,
        )

    @admin.action(description="Confirm", permissions=["change"])
    def confirm(self, request, queryset):
        self._verb(request, queryset, registration_services.confirm, "Confirmed")

    @admin.action(description="Cancel", permissions=["change"])
    def cancel(self, request, queryset):
        self._verb(request, queryset, registration_services.cancel, "Cancelled")

    @admin.action(description="Mark attended", permissions=["checkin"])
    def mark_attended(self, request, queryset):
        self._verb(request, queryset, registration_services.mark_attended, "Marked attended")

    @admin.action(description="Undo attendance", permissions=["change"])
    def undo_attendance(self, request, queryset):
        self._verb(request, queryset, registration_services.undo_attendance, "Undone")

    @admin.action(description="Reset to draft", permissions=["change"])
    def reset_to_draft(self, request, queryset):
        self._verb(request, queryset, registration_services.reset_to_draft, "Reset to draft")

    @admin.action(description="Archive", permissions=["change"])
    def archive(self, request, queryset):
        self._verb(request, queryset, registration_services.archive, "Archived")

    @admin.action(description="Unarchive", permissions=["change"])
    def unarchive(self, request, queryset):
        self._verb(request, queryset, registration_services.unarchive, "Unarchived")

    def has_checkin_permission(self, request):
        return request.user.has_perm("events.checkin_registration")


# --- schedulers and templates ----------------------------------------------------------------


@admin.register(Mail)
class MailAdmin(admin.ModelAdmin):
    list_display = (
        "template_ref",
        "event",
        "interval_type",
        "interval_nbr",
        "interval_unit",
        "scheduled_date",
        "state",
        "mail_count_done",
        "error_datetime",
    )
    list_filter = ("interval_type", "notification_type", "mail_done")
    search_fields = ("template_ref", "event__name")
    list_select_related = ("event",)
    readonly_fields = (
        "scheduled_date",
        "mail_done",
        "mail_count_done",
        "last_registration_id",
        "error_datetime",
        "error_message",
        "skipped_reason",
        "created_at",
    )

    @admin.display(description="state")
    def state(self, obj):
        return obj.mail_state


@admin.register(MailRegistration)
class MailRegistrationAdmin(admin.ModelAdmin):
    list_display = (
        "scheduler",
        "registration",
        "scheduled_date",
        "mail_sent",
        "sent_at",
        "outcome",
    )
    list_filter = ("mail_sent", "outcome")
    list_select_related = ("scheduler", "registration")
    raw_id_fields = ("scheduler", "registration")


@admin.register(MailSlot)
class MailSlotAdmin(admin.ModelAdmin):
    list_display = ("scheduler", "slot", "scheduled_date", "mail_count_done", "mail_done")
    list_select_related = ("scheduler", "slot")


@admin.register(TypeMail)
class TypeMailAdmin(admin.ModelAdmin):
    list_display = (
        "template_ref",
        "event_type",
        "interval_type",
        "interval_nbr",
        "interval_unit",
        "notification_type",
    )
    list_filter = ("event_type", "interval_type")


@admin.register(MessageTemplate)
class MessageTemplateAdmin(admin.ModelAdmin):
    list_display = ("name", "ref", "channel", "subject", "updated_at")
    list_filter = ("channel",)
    search_fields = ("name", "ref", "subject")


@admin.register(MailOutbox)
class MailOutboxAdmin(admin.ModelAdmin):
    list_display = ("recipient", "subject", "state", "attempts", "next_attempt_at", "sent_at")
    list_filter = ("state",)
    search_fields = ("recipient", "subject", "message_id")
    readonly_fields = [f.name for f in MailOutbox._meta.fields]

    def has_add_permission(self, request):
        return False


# --- audit and catalog -----------------------------------------------------------------------


@admin.register(EventAuditLog)
class EventAuditLogAdmin(admin.ModelAdmin):
    list_display = ("at", "verb", "actor_type", "actor_label", "event_id", "registration_id")
    list_filter = ("actor_type", "verb")
    search_fields = ("verb", "actor_label")
    date_hierarchy = "at"
    readonly_fields = (
        "at",
        "actor_type",
        "actor_id",
        "actor_label",
        "event",
        "registration",
        "verb",
        "data",
    )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(LinkedProduct)
class LinkedProductAdmin(admin.ModelAdmin):
    list_display = ("event_name", "ticket_name", "product_ref", "price", "currency", "is_published")
    list_filter = ("is_published",)
    search_fields = ("event_name", "ticket_name", "product_ref")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
