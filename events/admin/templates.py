"""The built-in template store (events.services.templates writes it)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.template import TemplateSyntaxError
from django.urls import NoReverseMatch
from django.utils.html import format_html, format_html_join

from events import hooks
from events.admin.base import (
    ServiceAdmin,
    delete_each,
    form_fields,
)
from events.admin.translations import TranslatedAdminMixin, translated_form
from events.errors import DomainError
from events.models import (
    MessageTemplate,
    Registration,
)
from events.services import templates as template_services


@admin.register(MessageTemplate)
class MessageTemplateAdmin(TranslatedAdminMixin, ServiceAdmin):
    list_display = ("name", "ref", "channel", "subject", "updated_at")
    list_filter = ("channel",)
    search_fields = ("name", "ref", "subject")
    readonly_fields = ("preview",)
    exclude = ("translations",)
    # The subject and body in each language (a registration in a language without them gets
    # the columns).
    form = translated_form(forms.ModelForm, MessageTemplate, ("subject", "body"))

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
        rendered = None
        if registration is None:
            shown = format_html("{}", "No registration to preview with yet.")
        else:
            try:
                rendered = DatabaseTemplateRenderer().render(
                    template_ref=obj.ref, registration=registration
                )
            except (TemplateSyntaxError, DomainError, NoReverseMatch) as exc:
                shown = format_html("{}", f"Cannot render: {exc}")
        if rendered is not None and not rendered.body_html:
            shown = format_html("<pre>{}</pre>", rendered.body_text)
        elif rendered is not None:
            shown = format_html(
                '<p><strong>{}</strong></p><iframe sandbox srcdoc="{}" '
                'style="width:100%;height:20em;border:1px solid #ccc"></iframe>',
                rendered.subject,
                rendered.body_html,
            )
        # Overlays add lines (events.hooks.template_previews; sms: length and segments).
        lines = [hook(template=obj, rendered=rendered) for hook in hooks.template_previews]
        return shown + format_html_join("", "<p>{}</p>", ((line,) for line in lines if line))

    def save_model(self, request, obj, form, change):
        fields = form_fields(form, changed_only=change)
        if change:
            template_services.update_template(template=obj, actor=request.user, **fields)
        else:
            obj.pk = template_services.create_template(actor=request.user, **fields).pk

    def delete_model(self, request, obj):
        """Through the store's delete verb: its schedulers go too, in one audited transaction."""
        template_services.delete_template(template_ref=obj.ref, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self,
            request,
            queryset,
            lambda t: template_services.delete_template(template_ref=t.ref, actor=request.user),
        )
