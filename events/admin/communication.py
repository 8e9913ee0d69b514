"""Communication schedulers, their per-attendee/per-slot rows, the outbox and the audit log."""

from __future__ import annotations

from django.contrib import admin, messages

from events import inputs
from events.admin.base import (
    ReadOnlyAdmin,
    ServiceErrorsMixin,
    run_verb,
)
from events.models import (
    Event,
    EventAuditLog,
    Mail,
    MailOutbox,
    MailRegistration,
    MailSlot,
)
from events.read import selectors
from events.services import delivery
from events.services import scheduler as scheduler_services


def report_run_pass(modeladmin: admin.ModelAdmin, request) -> None:
    """The "run pass now" action: the pass is global; its report becomes the message."""
    report = scheduler_services.run_pass()
    level = messages.WARNING if report.errors else messages.SUCCESS
    modeladmin.message_user(request, f"Scheduler pass: {report}.", level)


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


class OutboxEventFilter(admin.SimpleListFilter):
    """The outbox rows of one event: by their attendee's event or their scheduler's (the event
    dashboard's "failed" alerts link here with `?event=<id>&state__exact=failed`). Shared by
    every outbox with `registration` and `scheduler` keys (mail here, SMS in the sms app)."""

    title = "event"
    parameter_name = "event"

    def lookups(self, request, model_admin):
        chosen = inputs.as_id(self.value() or "")
        events = Event.objects.order_by("-date_begin").values_list("pk", "name")[:20]
        choices = [(str(pk), name) for pk, name in events]
        if chosen is not None and str(chosen) not in {c for c, _ in choices}:
            choices += [
                (str(pk), name)
                for pk, name in Event.objects.filter(pk=chosen).values_list("pk", "name")
            ]
        return choices

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        event_id = inputs.as_id(value)  # ASCII digits within bigint, else no rows
        if event_id is None:
            return queryset.none()
        return selectors.outbox_of_event(queryset, event_id)


@admin.register(MailOutbox)
class MailOutboxAdmin(admin.ModelAdmin):
    list_display = (
        "recipient",
        "subject",
        "state",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "error",
    )
    list_filter = ("state", OutboxEventFilter)
    search_fields = ("recipient", "subject", "message_id")
    readonly_fields = [f.name for f in MailOutbox._meta.fields]
    actions = ["retry"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="last error")
    def error(self, obj: MailOutbox) -> str:
        return obj.last_error[:120]

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("events.change_mailoutbox")

    @admin.action(description="Retry the selected failed mails now", permissions=["retry"])
    def retry(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda row: delivery.requeue(message=row, actor=request.user),
            "Mails queued again",
        )


# --- audit and catalog -----------------------------------------------------------------------


class WhenFilter(admin.DateFieldListFilter):
    """Django's fixed date ranges (today, past 7 days, this month, this year), titled "time"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "time"


class VerbFilter(admin.SimpleListFilter):
    """The verbs the trail holds (selectors.audit_verbs: one index probe per verb), where
    Django's choice list would read every row for them; the parameter keeps Django's name."""

    title = "verb"
    parameter_name = "verb"

    def lookups(self, request, model_admin):
        return [(verb, verb) for verb in selectors.audit_verbs()]

    def queryset(self, request, queryset):
        verb = self.value()  # None: no filter; "" is a verb like any other, as in Django's
        return queryset.filter(verb=verb) if verb is not None else queryset


@admin.register(EventAuditLog)
class EventAuditLogAdmin(admin.ModelAdmin):
    list_display = ("at", "verb", "actor_type", "actor_label", "event_id", "registration_id")
    # The trail only grows (a row per booking): the date filter offers fixed ranges, where a
    # date hierarchy reads every row's day on each load, and only the filtered rows are counted.
    list_filter = (("at", WhenFilter), "actor_type", VerbFilter)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # "Show counts" would count the trail per choice
    search_fields = ("verb", "actor_label")
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
