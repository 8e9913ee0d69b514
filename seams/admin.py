"""The inbox in the admin: read only, filtered by status / type / order, with a replay action
that calls `seams.services.replay` and reports each outcome as a message (spec-overlay.md §1.5).
The outbound webhooks: endpoints (written by the webhook verbs) and their deliveries with
their attempts and a "send again" action.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from events.admin.base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    ServiceAdmin,
    delete_each,
    form_fields,
    run_verb,
)
from seams import messages as seam_messages
from seams.dashboard import deliveries_in_state
from seams.models import (
    WEBHOOK_TYPES,
    DeliveryState,
    InboxStatus,
    SeamInbox,
    SeamOrder,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from seams.services import replay, webhooks


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


# --- outbound webhooks --------------------------------------------------------------------------


class EndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=[(t, t) for t in WEBHOOK_TYPES],
        widget=forms.CheckboxSelectMultiple,
        initial=list(WEBHOOK_TYPES),
        help_text="The message types this endpoint receives.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("name", "url", "event", "event_types")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ServiceAdmin):
    """Endpoints are written by the webhook verbs (seams.services.webhooks): created with a
    fresh secret shown here for the host to copy, rotated, enabled and disabled by action."""

    form = EndpointForm
    list_display = (
        "name",
        "url",
        "scope",
        "status",
        "waiting",
        "refused",
        "last_success_at",
        "deliveries_link",
    )
    list_filter = ("enabled",)
    search_fields = ("name", "url")
    autocomplete_fields = ("event",)
    list_select_related = ("event",)
    actions = ("rotate_secrets", "enable_endpoints", "disable_endpoints")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return (
            "secret",
            "previous_secret_until",
            "enabled",
            "disabled_at",
            "disabled_reason",
            "failing_since",
            "consecutive_failures",
            "last_success_at",
            "created_at",
        )

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                waiting_count=deliveries_in_state(DeliveryState.PENDING),
                refused_count=deliveries_in_state(DeliveryState.FAILED),
            )
        )

    @admin.display(description="events")
    def scope(self, obj: WebhookEndpoint):
        return obj.event.name if obj.event_id else "All events"

    @admin.display(description="status")
    def status(self, obj: WebhookEndpoint):
        if not obj.enabled:
            return format_html("<strong>disabled</strong> {}", obj.disabled_reason)
        if obj.failing_since:
            return format_html(
                "failing since {} ({} attempts)",
                f"{obj.failing_since:%Y-%m-%d %H:%M}",
                obj.consecutive_failures,
            )
        return "healthy"

    @admin.display(description="waiting", ordering="waiting_count")
    def waiting(self, obj):
        return obj.waiting_count

    @admin.display(description="refused", ordering="refused_count")
    def refused(self, obj):
        return obj.refused_count

    @admin.display(description="deliveries")
    def deliveries_link(self, obj: WebhookEndpoint):
        url = reverse("admin:seams_webhookdelivery_changelist") + f"?endpoint__id__exact={obj.pk}"
        return format_html('<a href="{}">deliveries</a>', url)

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            webhooks.update_endpoint(endpoint=obj, actor=request.user, **fields)
        else:
            obj.pk = webhooks.create_endpoint(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        webhooks.delete_endpoint(endpoint=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda e: webhooks.delete_endpoint(endpoint=e, actor=request.user),
        )

    @admin.action(description="Rotate the secret (the old one signs too for a while)")
    def rotate_secrets(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda e: webhooks.rotate_secret(endpoint=e, actor=request.user),
            "Secrets rotated",
        )

    @admin.action(description="Enable (waiting deliveries go out now)")
    def enable_endpoints(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda e: webhooks.set_enabled(endpoint=e, enabled=True, actor=request.user),
            "Enabled",
        )

    @admin.action(description="Disable (deliveries wait)")
    def disable_endpoints(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda e: webhooks.set_enabled(endpoint=e, enabled=False, actor=request.user),
            "Disabled",
        )


class AttemptInline(ReadOnlyInline):
    model = WebhookAttempt
    fields = ("at", "status", "duration_ms", "error", "response")
    readonly_fields = fields
    show_change_link = False
    ordering = ("-id",)


class TypeOfMessageFilter(admin.SimpleListFilter):
    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [(kind, kind) for kind in WEBHOOK_TYPES]

    def queryset(self, request, queryset):
        kind = self.value()
        return queryset.filter(message__type=kind) if kind else queryset


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Each message to each endpoint with its attempts; "send again" queues it again (the same
    message, the same webhook-id)."""

    list_display = (
        "id",
        "created_at",
        "message_type",
        "subject",
        "version",
        "endpoint",
        "state",
        "attempts",
        "last_status",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("state", TypeOfMessageFilter, "endpoint")
    list_select_related = ("message", "endpoint")
    search_fields = ("subject", "message__msg_id")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "message_id_text",
        "message_type",
        "endpoint",
        "subject",
        "version",
        "state",
        "attempts",
        "next_attempt_at",
        "last_status",
        "last_error",
        "delivered_at",
        "payload",
    )
    readonly_fields = fields
    inlines = (AttemptInline,)
    actions = ("send_again",)

    @admin.display(description="type", ordering="message__type")
    def message_type(self, obj: WebhookDelivery):
        return obj.message.type

    @admin.display(description="webhook-id")
    def message_id_text(self, obj: WebhookDelivery):
        return obj.message.msg_id

    @admin.display(description="payload")
    def payload(self, obj: WebhookDelivery):
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.message.payload, indent=2, ensure_ascii=False)
        )

    def has_send_again_permission(self, request) -> bool:
        return request.user.has_perm("seams.change_webhookdelivery")

    @admin.action(description="Send again", permissions=["send_again"])
    def send_again(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda d: webhooks.send_again(delivery=d, actor=request.user),
            "Queued again",
        )
