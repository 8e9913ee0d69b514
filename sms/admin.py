"""The SMS outbox in the admin: read-only rows (only the delivery service writes them) and a
"retry" action that re-queues through `sms.services.retry`. Also the sms line of the message
template preview (length, encoding, segments), through `events.hooks.template_previews`."""

from __future__ import annotations

from django.contrib import admin

from events.admin.base import ReadOnlyAdmin, run_verb
from events.admin.communication import OutboxEventFilter
from events.models import MessageTemplate, NotificationType
from events.ports import RenderedMessage
from sms import services
from sms.models import SmsOutbox
from sms.segments import measure


@admin.register(SmsOutbox)
class SmsOutboxAdmin(ReadOnlyAdmin):
    list_display = (
        "to",
        "reference",
        "state",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "error",
    )
    list_filter = ("state", OutboxEventFilter)
    search_fields = ("to", "reference")
    readonly_fields = [f.name for f in SmsOutbox._meta.fields]
    actions = ["retry"]

    @admin.display(description="last error")
    def error(self, obj: SmsOutbox) -> str:
        return obj.last_error[:120]

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("sms.change_smsoutbox")

    @admin.action(description="Retry the selected SMS now", permissions=["retry"])
    def retry(self, request, queryset):
        run_verb(
            self,
            request,
            queryset.order_by("pk"),
            lambda row: services.retry(message=row, actor=request.user),
            "SMS re-queued",
        )


def template_preview(*, template: MessageTemplate, rendered: RenderedMessage | None) -> str:
    """The sms line of the template preview: what the rendered body costs (or the source when
    there is no attendee to render for)."""
    if template.channel != NotificationType.SMS:
        return ""
    if rendered is None:
        return f"SMS (template source, not rendered): {measure(template.body)}"
    return f"SMS as rendered: {measure(rendered.body_text)}"
