"""Registrations and the rows services keep about them (answers, seat ledger, intake keys)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from events.admin.base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    ServiceAdmin,
    run_verb,
)
from events.models import (
    IntakeIdempotency,
    MailRegistration,
    Registration,
    RegistrationAnswer,
    RegistrationState,
    SeatLedger,
)
from events.services import capability, confirmation, links
from events.services import registrations as registration_services


class AnswerInline(ReadOnlyInline):
    model = RegistrationAnswer
    fields = ("question", "choice", "text_value")
    readonly_fields = fields


class MailRowInline(ReadOnlyInline):
    model = MailRegistration
    fields = ("scheduler", "scheduled_date", "mail_sent", "sent_at", "outcome")
    readonly_fields = fields


@admin.register(Registration)
class RegistrationAdmin(ServiceAdmin):
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
    list_filter = (
        "state",
        "event",
        "ticket",
        "sale_status",
        "is_paid",
        "active",
        "contact_source",
        "created_at",
    )
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
        "lang",
        "created_at",
        "updated_at",
        "name",
        "email",
        "phone",
        "company_name",
        "tickets_page",
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
        "revoke_links",
        "resend_confirmation",
    ]

    add_fields = (
        "event",
        "ticket",
        "slot",
        "name",
        "email",
        "phone",
        "company_name",
        "lang",
        "state",
    )

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
            # Empty: the event's default language (registrations.register decides).
            lang = form.base_fields["lang"]
            lang.required, lang.initial = False, ""
            lang.choices = [("", "The event's language"), *settings.LANGUAGES]
            lang.help_text = "The language of every message to the attendee."
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
            lang=data.get("lang") or None,
            actor=request.user,
        )
        obj.pk = registration.pk
        obj.barcode = registration.barcode

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

    @admin.action(description="Revoke the attendee's links", permissions=["change"])
    def revoke_links(self, request, queryset):
        """Every link minted before stops opening (capability.revoke_links bumps the version);
        links sent afterwards carry the new version."""
        self._verb(request, queryset, capability.revoke_links, "Links revoked")

    def get_urls(self):
        return [
            path(
                "<path:object_id>/resend-confirmation/",
                self.admin_site.admin_view(self.resend_confirmation_view),
                name="events_registration_resend_confirmation",
            ),
            *super().get_urls(),
        ]

    def resend_confirmation_view(self, request, object_id):
        """POST from the change page's "Resend confirmation" button."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        registration = self.get_object(request, object_id)
        if registration is None or not self.has_change_permission(request, registration):
            raise PermissionDenied
        run_verb(
            self,
            request,
            [registration],
            lambda r: confirmation.resend_confirmation(registration=r, actor=request.user),
            "Confirmation re-queued",
        )
        return HttpResponseRedirect(
            reverse("admin:events_registration_change", args=[registration.pk])
        )

    @admin.action(description="Resend the confirmation mail", permissions=["change"])
    def resend_confirmation(self, request, queryset):
        self._verb(request, queryset, confirmation.resend_confirmation, "Confirmation re-queued")

    @admin.display(description="attendee's tickets page")
    def tickets_page(self, obj):
        """The attendee's my-tickets page (a link minted now, valid like the mailed one)."""
        if obj.pk is None:
            return "—"
        url = links.tickets_path(obj)
        return format_html(
            '<a href="{}" target="_blank" rel="noopener">Open my-tickets page</a>', url
        )

    def has_checkin_permission(self, request):
        return request.user.has_perm("events.checkin_registration")


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
