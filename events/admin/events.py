"""Events, their tickets, slots and questions: every write goes through a service verb
(events, tickets, questions); overlays add to the Event admin through `extensions`."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IS_POPUP_VAR
from django.db.models import QuerySet
from django.urls import path, reverse
from django.utils.html import format_html

from events.admin import badges, dashboard, exports
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
from events.admin.communication import report_run_pass
from events.admin.extensions import event_extensions
from events.admin.translations import TranslatedAdminMixin, input_names, translated_form
from events.models import (
    Event,
    EventLogo,
    LinkedProduct,
    Mail,
    Question,
    QuestionChoice,
    Slot,
    Ticket,
)
from events.services import events as event_services
from events.services import logos, questions, reference, seats, tickets

TICKET_ROWS = RowVerbs(
    create=lambda event, actor, fields: tickets.create_ticket(actor=actor, event=event, **fields),
    update=lambda t, actor, fields: tickets.update_ticket(ticket=t, actor=actor, **fields),
    delete=lambda t, actor: tickets.delete_ticket(ticket=t, actor=actor),
)
QUESTION_ROWS = RowVerbs(
    create=lambda event, actor, fields: questions.create_question(
        actor=actor, event=event, **fields
    ),
    update=lambda q, actor, fields: questions.update_question(question=q, actor=actor, **fields),
    delete=lambda q, actor: questions.delete_question(question=q, actor=actor),
)


class TicketInline(ServiceInline):
    model = Ticket
    fk_name = "event"
    verbs = TICKET_ROWS
    form = translated_form(forms.ModelForm, Ticket, ("name",))
    fields = (
        "name",
        *input_names(("name",)),
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


class QuestionInline(ServiceInline):
    model = Question
    form = translated_form(AnsweredQuestionForm, Question, ("title",))
    fk_name = "event"
    verbs = QUESTION_ROWS
    fields = (
        "title",
        *input_names(("title",)),
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


EVENT_TEXTS = ("name", "description", "ticket_instructions", "venue")
# The logo's upload fields are the form's own (not columns): only for those who may change.
LOGO_FIELDS = ("logo_upload", "logo_remove")


class EventForm(forms.ModelForm):
    """The event's fields, and its logo (not a column: `logos.set_logo` stores it apart)."""

    logo_upload = forms.FileField(
        required=False,
        label="Organiser's logo",
        help_text="PNG, JPEG, GIF or WebP, at most 2 MB: printed on the PDF tickets and badges.",
    )
    logo_remove = forms.BooleanField(required=False, label="Remove the logo")

    class Meta:
        model = Event
        fields = ("ticket_pdf",)  # the admin's fieldsets name the rest


@admin.register(Event)
class EventAdmin(TranslatedAdminMixin, ServiceAdmin):
    list_display = (
        "name",
        "date_begin",
        "stage",
        "is_published",
        "seats_reserved",
        "seats_used",
        "seats_available",
        "kanban_state",
        "dashboard_link",
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
        "current_logo",
    )
    inlines = [TicketInline, SlotInline, QuestionInline, MailInline]
    form = translated_form(EventForm, Event, EVENT_TEXTS)
    actions = [
        "publish",
        "unpublish",
        "mark_done",
        "cancel_event",
        "run_pass_now",
        exports.export_attendees_csv,
        exports.export_attendees_xlsx,
    ]
    fieldsets = (
        (None, {"fields": ("name", "event_type", "stage", "kanban_state", "is_published", "tags")}),
        (
            "When",
            {
                "fields": (
                    "date_begin",
                    "date_end",
                    "date_tz",
                    "is_multi_slots",
                    "cancel_deadline_hours",
                )
            },
        ),
        ("Seats", {"fields": ("seats_limited", "seats_max", "seat_summary")}),
        ("Where", {"fields": ("venue", "address", "country", "organizer")}),
        ("Texts", {"fields": ("description", "ticket_instructions", "note", "lang", "currency")}),
        (
            "Texts in other languages",
            {
                "fields": input_names(EVENT_TEXTS),
                "description": "What an attendee reading that language sees; left empty, they "
                "read the texts above (written in the event's language).",
                "classes": ("collapse",),
            },
        ),
        (
            "Tickets and badges",
            {"fields": ("ticket_pdf", "current_logo", "logo_upload", "logo_remove")},
        ),
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

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if change and not self.has_change_permission(request, obj):
            for name in LOGO_FIELDS:
                form.base_fields.pop(name, None)
        return form

    # --- the dashboard and the attendee exports (events.admin.dashboard / exports) ---------

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "exports/<int:export_id>/",
                view(
                    lambda request, export_id: exports.export_progress_view(
                        self, request, export_id
                    )
                ),
                name="events_attendee_export",
            ),
            path(
                "exports/<int:export_id>/download/",
                view(
                    lambda request, export_id: exports.export_download_view(
                        self, request, export_id
                    )
                ),
                name="events_attendee_export_download",
            ),
            path(
                "<path:object_id>/dashboard/",
                view(lambda request, object_id: dashboard.dashboard_view(self, request, object_id)),
                name="events_event_dashboard",
            ),
            path(
                "<path:object_id>/badges/",
                view(lambda request, object_id: badges.badges_view(self, request, object_id)),
                name="events_event_badges",
            ),
            path(
                "<path:object_id>/export/<str:fmt>/",
                view(
                    lambda request, object_id, fmt: exports.export_view(
                        self, request, object_id, fmt
                    )
                ),
                name="events_event_export",
            ),
            *super().get_urls(),
        ]

    def has_export_permission(self, request):
        """The export actions sit among the changelist's tools, which only those who may change
        events get (the desk group sees no action at all); anyone holding the export permission
        (`exports.PERMISSION`) exports from the dashboard's buttons."""
        return exports.can_export(request) and self.has_change_permission(request)

    @admin.display(description="dashboard")
    def dashboard_link(self, obj):
        url = reverse("admin:events_event_dashboard", args=[obj.pk])
        return format_html('<a href="{}">Dashboard</a>', url)

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

    def get_fieldsets(self, request, obj=None):
        """The overlays' read-only fields show in an "Overlays" section of the change page;
        the logo's upload fields only to those who may change the event."""
        extra = [field for ext in event_extensions() for field in ext.readonly_fields]
        fieldsets = super().get_fieldsets(request, obj)
        if not self.has_change_permission(request, obj):
            fieldsets = tuple(
                (name, {**opts, "fields": tuple(f for f in opts["fields"] if f not in LOGO_FIELDS)})
                for name, opts in fieldsets
            )
        if not extra:
            return fieldsets
        return (*fieldsets, ("Overlays", {"fields": tuple(extra)}))

    def get_actions(self, request):
        actions = super().get_actions(request)
        if IS_POPUP_VAR in request.GET:
            return actions  # Django offers no actions in a popup
        extra = [
            (func, func.__name__, getattr(func, "short_description", func.__name__))
            for ext in event_extensions()
            for func in ext.actions
        ]
        # An overlay's action states its permissions (@admin.action(permissions=[…])) like a
        # core one; Django's own filter drops those the user lacks (a desk user gets none).
        for func, name, description in self._filter_actions_by_permissions(request, extra):
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
            capacities = seats.capacities(page)
            for event in page:
                event._seat_summary = summaries[event.pk]
                event._seat_capacity = capacities[event.pk]
            for ext in event_extensions():
                if ext.prefetch is not None:
                    ext.prefetch(page)
        return response

    def _summary(self, obj: Event) -> seats.SeatSummary:
        summary = getattr(obj, "_seat_summary", None)
        if summary is None:
            summary = obj._seat_summary = seats.event_summary(event=obj)
        return summary

    def _capacity(self, obj: Event) -> seats.Capacity:
        """Every limit counted: the event's and its tickets' (per slot), not the event's only."""
        capacity = getattr(obj, "_seat_capacity", None)
        if capacity is None:
            capacity = obj._seat_capacity = seats.event_capacity(event=obj)
        return capacity

    @admin.display(description="reserved")
    def seats_reserved(self, obj):
        return self._summary(obj).reserved

    @admin.display(description="used")
    def seats_used(self, obj):
        return self._summary(obj).used

    @admin.display(description="available")
    def seats_available(self, obj):
        capacity = self._capacity(obj)
        if capacity.available is None:
            return "∞"
        return f"{capacity.available} (sold out)" if capacity.sold_out else capacity.available

    @admin.display(description="seats")
    def seat_summary(self, obj):
        if obj.pk is None:
            return "—"
        s = self._summary(obj)
        capacity = self._capacity(obj)
        return format_html(
            "reserved {} · used {} · taken {} · max {} · available {}",
            s.reserved,
            s.used,
            s.taken,
            "unlimited" if capacity.max is None else capacity.max,
            "∞" if capacity.available is None else capacity.available,
        )

    def save_model(self, request, obj, form, change):
        """Forward to the event services: creation applies the template once, edits audit."""
        data = {f: form.cleaned_data[f] for f in form.changed_data if f in form.cleaned_data}
        tags = data.pop("tags", None)
        upload = data.pop("logo_upload", None)
        remove = data.pop("logo_remove", False)
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
            reference.set_event_tags(event=event, tags=tags, actor=request.user)
        if upload is not None:
            logos.set_logo(event=event, content=upload.read(), actor=request.user)
        elif remove:
            logos.set_logo(event=event, content=None, actor=request.user)

    @admin.display(description="current logo")
    def current_logo(self, obj):
        logo = EventLogo.objects.filter(event_id=obj.pk).defer("content").first()
        if obj.pk is None or logo is None:
            return "none"
        return f"{logo.width} × {logo.height} px"

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
class TicketAdmin(TranslatedAdminMixin, ServiceAdmin):
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
    exclude = ("translations",)
    form = translated_form(forms.ModelForm, Ticket, ("name", "description"))

    def get_readonly_fields(self, request, obj=None):
        """A ticket never changes owner (one with registrations: a database trigger refuses
        it too); its terms go through tickets.update_ticket."""
        return ("event", "event_type") if obj is not None else ()

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            tickets.update_ticket(ticket=obj, actor=request.user, **fields)
        else:
            obj.pk = tickets.create_ticket(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        tickets.delete_ticket(ticket=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda t: tickets.delete_ticket(ticket=t, actor=request.user)
        )


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
        delete_each(
            self,
            request,
            queryset,
            lambda s: event_services.delete_slot(slot=s, actor=request.user),
        )


CHOICE_ROWS = RowVerbs(
    create=lambda question, actor, fields: questions.create_choice(
        question=question, actor=actor, **fields
    ),
    update=lambda c, actor, fields: questions.update_choice(choice=c, actor=actor, **fields),
    delete=lambda c, actor: questions.delete_choice(choice=c, actor=actor),
)


class QuestionChoiceInline(ServiceInline):
    model = QuestionChoice
    form = translated_form(forms.ModelForm, QuestionChoice, ("name",))
    fields = ("name", *input_names(("name",)), "sequence")
    verbs = CHOICE_ROWS


@admin.register(Question)
class QuestionAdmin(TranslatedAdminMixin, ServiceAdmin):
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
    exclude = ("translations",)
    form = translated_form(forms.ModelForm, Question, ("title",))

    def get_readonly_fields(self, request, obj=None):
        """A question never changes owner; an answered one keeps its type too (spec.md §2.7;
        questions.update_question and a database trigger refuse it)."""
        if obj is None:
            return ()
        if obj.answers.exists():
            return ("question_type", "event", "event_type")
        return ("event", "event_type")

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            questions.update_question(question=obj, actor=request.user, **fields)
        else:
            obj.pk = questions.create_question(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        questions.delete_question(question=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda q: questions.delete_question(question=q, actor=request.user),
        )


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
class QuestionChoiceAdmin(TranslatedAdminMixin, ServiceAdmin):
    list_display = ("name", "question", "sequence")
    search_fields = ("name", "question__title")
    list_select_related = ("question",)
    exclude = ("translations",)
    form = translated_form(forms.ModelForm, QuestionChoice, ("name",))

    def get_readonly_fields(self, request, obj=None):
        return ("question",) if obj is not None else ()  # a choice never moves

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            questions.update_choice(choice=obj, actor=request.user, **fields)
        else:
            question = fields.pop("question")
            obj.pk = questions.create_choice(question=question, actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        questions.delete_choice(choice=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda c: questions.delete_choice(choice=c, actor=request.user)
        )
