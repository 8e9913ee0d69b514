"""Staff surface (spec.md §9): a thin admin; every change of state calls a service."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.template import TemplateSyntaxError
from django.urls import NoReverseMatch
from django.utils.html import format_html

from events.admin.base import ReadOnlyAdmin, ReadOnlyInline, ServiceErrorsMixin, run_verb
from events.admin.extensions import event_extensions
from events.errors import DomainError
from events.models import (
    Event,
    EventAuditLog,
    EventType,
    IntakeIdempotency,
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
    RegistrationState,
    SeatLedger,
    Slot,
    Stage,
    Tag,
    TagCategory,
    Ticket,
    TypeMail,
)
from events.services import events as event_services
from events.services import registrations as registration_services
from events.services import scheduler as scheduler_services
from events.services import seats
from events.services import templates as template_services

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


class AnsweredQuestionForm(forms.ModelForm):
    """On an answered question the type is shown but cannot change (spec.md §2.7)."""

    class Meta:
        model = Question
        fields = ("title", "question_type", "is_mandatory_answer", "once_per_order", "sequence")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and self.instance.answers.exists():
            self.fields["question_type"].disabled = True
            self.fields["question_type"].help_text = "Answered: the type cannot change."


class QuestionInline(admin.TabularInline):
    model = Question
    form = AnsweredQuestionForm
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
        "error_datetime",
        "error_message",
        "skipped_reason",
    )
    readonly_fields = fields

    @admin.display(description="state")
    def state(self, obj: Mail) -> str:
        return obj.mail_state


def report_run_pass(modeladmin: admin.ModelAdmin, request) -> None:
    """The "run pass now" action: the pass is global; its report becomes the message."""
    report = scheduler_services.run_pass()
    level = messages.WARNING if report.errors else messages.SUCCESS
    modeladmin.message_user(request, f"Scheduler pass: {report}.", level)


@admin.register(Event)
class EventAdmin(ServiceErrorsMixin, admin.ModelAdmin):
    list_display = (
        "name",
        "date_begin",
        "stage",
        "is_published",
        "seats_reserved",
        "seats_used",
        "seats_available",
        "kanban_state",
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
    actions = ["publish", "unpublish", "mark_done", "cancel_event", "run_pass_now"]
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

    # --- the overlays' additions (events.admin.extensions), read on every request ---------

    def get_inlines(self, request, obj):
        extra = [inline for ext in event_extensions() for inline in ext.inlines]
        return [*super().get_inlines(request, obj), *extra]

    def get_list_display(self, request):
        extra = [column for ext in event_extensions() for column in ext.list_display]
        return (*super().get_list_display(request), *extra)

    def get_readonly_fields(self, request, obj=None):
        extra = [field for ext in event_extensions() for field in ext.readonly_fields]
        return (*super().get_readonly_fields(request, obj), *extra)

    def get_actions(self, request):
        actions = super().get_actions(request)
        for ext in event_extensions():
            for func in ext.actions:
                name = func.__name__
                description = getattr(func, "short_description", name.replace("_", " "))
                actions[name] = (func, name, description)
        return actions

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        cl = getattr(response, "context_data", {}).get("cl")
        if cl is not None:
            # One batch for the page, kept on the listed rows themselves (this ModelAdmin
            # instance is shared by every request, so it must not hold per-request data).
            page = list(cl.result_list)
            summaries = seats.summaries(page)
            for event in page:
                event._seat_summary = summaries[event.pk]
        return response

    def _summary(self, obj: Event) -> seats.SeatSummary:
        summary = getattr(obj, "_seat_summary", None)
        if summary is None:
            summary = obj._seat_summary = seats.event_summary(event=obj)
        return summary

    @admin.display(description="reserved")
    def seats_reserved(self, obj):
        return self._summary(obj).reserved

    @admin.display(description="used")
    def seats_used(self, obj):
        return self._summary(obj).used

    @admin.display(description="available")
    def seats_available(self, obj):
        summary = self._summary(obj)
        if summary.available is None:
            return "∞"
        return f"{summary.available} (sold out)" if summary.sold_out else summary.available

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

    @admin.action(description="Run the scheduler pass now", permissions=["change"])
    def run_pass_now(self, request, queryset):
        report_run_pass(self, request)


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

    def get_readonly_fields(self, request, obj=None):
        """A ticket with registrations keeps its event (a database trigger refuses it too)."""
        if obj is not None and obj.registrations.exists():
            return ("event", "event_type")
        return ()


@admin.register(Slot)
class SlotAdmin(ServiceErrorsMixin, admin.ModelAdmin):
    """Slots are added and deleted through the event services (times in the event's zone,
    audited, reminders rescheduled); once created a slot is read-only."""

    list_display = ("__str__", "event", "start_datetime", "end_datetime")
    list_filter = ("event",)
    search_fields = ("event__name",)
    list_select_related = ("event",)
    fields = ("event", "date", "start_hour", "end_hour", "start_datetime", "end_datetime")

    def get_readonly_fields(self, request, obj=None):
        return self.fields if obj is not None else ("start_datetime", "end_datetime")

    def save_model(self, request, obj, form, change):
        if change:
            return
        data = form.cleaned_data
        slot = event_services.add_slot(
            event=data["event"],
            date=data["date"],
            start_hour=data["start_hour"],
            end_hour=data["end_hour"],
            actor=request.user,
        )
        obj.pk = slot.pk

    def save_related(self, request, form, formsets, change):
        """The service wrote the slot and its audit entry."""

    def delete_model(self, request, obj):
        event_services.delete_slot(slot=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for slot in queryset.order_by("pk"):
            event_services.delete_slot(slot=slot, actor=request.user)


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

    def get_readonly_fields(self, request, obj=None):
        """An answered question keeps its type and owner (spec.md §2.7; a trigger refuses it)."""
        if obj is not None and obj.answers.exists():
            return ("question_type", "event", "event_type")
        return ()


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
class RegistrationAdmin(ServiceErrorsMixin, admin.ModelAdmin):
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

    add_fields = ("event", "ticket", "slot", "name", "email", "phone", "company_name", "state")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else super().get_fields(request, obj)

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is None:
            form.base_fields["state"].choices = [
                (RegistrationState.OPEN, "Registered"),
                (RegistrationState.DRAFT, "Unconfirmed"),
            ]
            form.base_fields["state"].initial = RegistrationState.OPEN
        return form

    def save_model(self, request, obj, form, change):
        """Adding goes through the register service (seat check, audit); edits are verbs."""
        if change:
            return
        data = form.cleaned_data
        (registration,) = registration_services.register(
            event=data["event"],
            ticket=data.get("ticket"),
            slot=data.get("slot"),
            state=data["state"],
            attendees=[{f: data.get(f) or "" for f in ("name", "email", "phone", "company_name")}],
            actor=request.user,
        )
        obj.pk = registration.pk
        obj.barcode = registration.barcode

    def save_related(self, request, form, formsets, change):
        """Nothing to save by hand: the service wrote the row and its audit entry.

        The read-only inlines' formsets are still "saved" (they hold no change, so nothing is
        written) because the admin's change message reads what they saved; skipping them
        turned every POST of the change form into a 500.
        """
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

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
class MailAdmin(ServiceErrorsMixin, admin.ModelAdmin):
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
    actions = ["run_pass_now"]
    add_fields = (
        "event",
        "sequence",
        "template_ref",
        "notification_type",
        "interval_nbr",
        "interval_unit",
        "interval_type",
        "include_existing",
    )

    @admin.display(description="state")
    def state(self, obj):
        return obj.mail_state

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return (*(f.name for f in Mail._meta.fields if f.name != "id"), "state")

    def save_model(self, request, obj, form, change):
        """Adding goes through add_scheduler (date computed, template checked, audited)."""
        if change:
            return
        data = form.cleaned_data
        mail = scheduler_services.add_scheduler(
            event=data["event"],
            sequence=data["sequence"],
            template_ref=data["template_ref"],
            notification_type=data["notification_type"],
            interval_nbr=data["interval_nbr"],
            interval_unit=data["interval_unit"],
            interval_type=data["interval_type"],
            include_existing=data["include_existing"],
            actor=request.user,
        )
        obj.pk = mail.pk

    def delete_model(self, request, obj):
        scheduler_services.delete_scheduler(scheduler=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for mail in queryset.order_by("pk"):
            scheduler_services.delete_scheduler(scheduler=mail, actor=request.user)

    @admin.action(description="Run the scheduler pass now", permissions=["change"])
    def run_pass_now(self, request, queryset):
        report_run_pass(self, request)


@admin.register(MailRegistration)
class MailRegistrationAdmin(ReadOnlyAdmin):
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


@admin.register(MailSlot)
class MailSlotAdmin(ReadOnlyAdmin):
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
    readonly_fields = ("preview",)

    @admin.display(description="preview (saved version, latest attendee)")
    def preview(self, obj: MessageTemplate):
        from events.adapters import DatabaseTemplateRenderer

        if obj.pk is None:
            return "Save the template to preview it."
        registration = (
            Registration.objects.filter(state__in=("open", "done"))
            .select_related("event", "ticket", "slot")
            .order_by("-pk")
            .first()
        )
        if registration is None:
            return "No registration to preview with yet."
        try:
            rendered = DatabaseTemplateRenderer().render(
                template_ref=obj.ref, registration=registration
            )
        except (TemplateSyntaxError, DomainError, NoReverseMatch) as exc:
            return f"Cannot render: {exc}"
        if not rendered.body_html:
            return format_html("<pre>{}</pre>", rendered.body_text)
        return format_html(
            '<p><strong>{}</strong></p><iframe sandbox srcdoc="{}" '
            'style="width:100%;height:20em;border:1px solid #ccc"></iframe>',
            rendered.subject,
            rendered.body_html,
        )

    def delete_model(self, request, obj):
        """Through the store's delete verb: its schedulers go too, in one audited transaction."""
        template_services.delete_template(template_ref=obj.ref, actor=request.user)

    def delete_queryset(self, request, queryset):
        for template in queryset.order_by("pk"):
            template_services.delete_template(template_ref=template.ref, actor=request.user)


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


@admin.register(QuestionChoice)
class QuestionChoiceAdmin(admin.ModelAdmin):
    list_display = ("name", "question", "sequence")
    search_fields = ("name", "question__title")
    list_select_related = ("question",)


@admin.register(RegistrationAnswer)
class RegistrationAnswerAdmin(ReadOnlyAdmin):
    list_display = ("registration", "question", "choice", "text_value")
    list_select_related = ("registration", "question", "choice")
    search_fields = ("text_value", "registration__name", "question__title")


@admin.register(SeatLedger)
class SeatLedgerAdmin(ReadOnlyAdmin):
    list_display = ("event", "slot", "ticket", "reserved", "used")
    list_select_related = ("event", "slot", "ticket")
    list_filter = ("event",)


@admin.register(IntakeIdempotency)
class IntakeIdempotencyAdmin(ReadOnlyAdmin):
    list_display = ("key", "event", "status_code", "created_at")
    list_select_related = ("event",)
    search_fields = ("key",)
