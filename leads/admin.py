"""The leads overlay's admin: a rule editor on the closed vocabulary, read-only lead rows, and
the "generate leads" actions (rules here, events through the Event admin extension point).

Thin, like every admin: the predicate inline's formset validates each row with the service's
own validator (a bad predicate is refused next to its field), and the rule with all its
predicates is saved by `create_rule` / `update_rule` in one call.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from events.admin.base import (
    ReadOnlyAdmin,
    ReadOnlyInline,
    ServiceErrorsMixin,
    action,
    delete_each,
    run_verb,
)
from events.admin.extensions import EventAdminExtension
from events.errors import DomainError
from leads import selectors
from leads.models import (
    Lead,
    LeadProvenance,
    LeadProvenanceRegistration,
    LeadRequest,
    LeadRule,
    LeadRulePredicate,
)
from leads.services import requests as request_services
from leads.services import rules as rule_services
from leads.services import vocabulary

RULE_FIELDS = (
    "name",
    "active",
    "lead_creation_basis",
    "lead_creation_trigger",
    "lead_type",
    "event",
    "team_ref",
    "user_ref",
    "tag_refs",
)
ALL_OPS = sorted({op for ops in vocabulary.VOCABULARY.values() for op in ops})


def vocabulary_table() -> str:
    rows = format_html_join(
        "",
        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
        vocabulary.HELP,
    )
    return format_html(
        "<p>All predicates of a rule must hold. Values are JSON.</p>"
        "<table><tr><th>field</th><th>ops</th><th>value</th></tr>{}</table>",
        rows,
    )


class PredicateForm(forms.ModelForm):
    field = forms.ChoiceField(choices=[(f, f) for f in vocabulary.VOCABULARY])
    op = forms.ChoiceField(choices=[(o, o) for o in ALL_OPS])
    value = forms.JSONField(
        required=False,
        help_text='JSON, e.g. [3, 4] or {"question": 5, "choice": 12}; empty for null.',
        widget=forms.TextInput(attrs={"size": 40}),
    )

    class Meta:
        model = LeadRulePredicate
        fields = ("field", "op", "value")


class PredicateFormSet(BaseInlineFormSet):
    """Each row is checked by the service's validator against the rule's scope; a refusal is
    shown on the row's field, op or value."""

    request = None  # set by LeadRuleAdmin._create_formsets

    def scope(self) -> vocabulary.Scope:
        """The rule's scope as the parent form cleaned it (the form is validated first)."""
        form = getattr(self.request, "_lead_rule_form", None)
        types = getattr(form, "cleaned_data", {}).get("event_types") or ()
        return vocabulary.scope_of(event=self.instance.event_id, event_types=types)

    def clean(self) -> None:
        super().clean()
        scope = self.scope()
        for form in self.forms:
            if not hasattr(form, "cleaned_data") or form.errors:
                continue
            if self.can_delete and self._should_delete_form(form):
                continue
            if not form.has_changed() and form.instance.pk is None:
                continue
            predicate = {k: form.cleaned_data.get(k) for k in ("field", "op", "value")}
            try:
                vocabulary.validate_predicates([predicate], scope=scope)
            except DomainError as exc:
                part = exc.details.get("part") or "value"
                form.add_error(part, f"{exc.code}: {exc.message}")


class PredicateInline(admin.TabularInline):
    model = LeadRulePredicate
    form = PredicateForm
    formset = PredicateFormSet
    extra = 1
    verbose_name = "predicate (closed vocabulary; see the table above)"


def _predicate_rows(formsets) -> list[dict]:
    rows = []
    for formset in formsets:
        if formset.model is not LeadRulePredicate:
            continue
        for form in formset.forms:
            if formset.can_delete and formset._should_delete_form(form):
                continue
            if form.instance.pk is None and not form.has_changed():
                continue
            rows.append({k: form.cleaned_data.get(k) for k in ("field", "op", "value")})
    return rows


@admin.register(LeadRule)
class LeadRuleAdmin(ServiceErrorsMixin, admin.ModelAdmin):
    list_display = (
        "name",
        "lead_creation_basis",
        "lead_creation_trigger",
        "lead_type",
        "event",
        "active",
    )
    list_filter = ("lead_creation_basis", "lead_creation_trigger", "lead_type", "active")
    search_fields = ("name",)
    list_select_related = ("event",)
    filter_horizontal = ("event_types",)
    inlines = [PredicateInline]
    readonly_fields = ("vocabulary",)
    fieldsets = (
        (None, {"fields": (*RULE_FIELDS[:5], "event", "event_types")}),
        ("Lead values", {"fields": ("team_ref", "user_ref", "tag_refs")}),
        ("Predicate vocabulary", {"fields": ("vocabulary",)}),
    )
    actions = ["generate_leads"]

    @admin.display(description="vocabulary")
    def vocabulary(self, obj) -> str:
        return vocabulary_table()

    def save_form(self, request, form, change):
        request._lead_rule_form = form  # the formsets need the rule's scope
        return super().save_form(request, form, change)

    def _create_formsets(self, request, obj, change):
        formsets, inlines = super()._create_formsets(request, obj, change)
        for formset in formsets:
            if isinstance(formset, PredicateFormSet):
                formset.request = request
        request._lead_rule_formsets = formsets
        return formsets, inlines

    def save_model(self, request, obj, form, change):
        data = {name: form.cleaned_data[name] for name in RULE_FIELDS if name in form.cleaned_data}
        data["event_types"] = list(form.cleaned_data.get("event_types") or ())
        data["predicates"] = _predicate_rows(getattr(request, "_lead_rule_formsets", []))
        if change:
            rule = rule_services.update_rule(rule=obj, actor=request.user, **data)
        else:
            rule = rule_services.create_rule(actor=request.user, **data)
        obj.__dict__.update(rule.__dict__)

    def save_related(self, request, form, formsets, change):
        # The rule's event types and predicates were saved by the service in save_model.
        for formset in formsets:
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []

    def delete_model(self, request, obj):
        rule_services.delete_rule(rule=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        delete_each(
            self, request, queryset, lambda r: rule_services.delete_rule(rule=r, actor=request.user)
        )

    @action("Generate leads (walk every event the rule applies to)")
    def generate_leads(self, request, queryset):
        run_verb(
            self,
            request,
            queryset,
            lambda rule: request_services.generate_leads(rule=rule, actor=request.user),
            "Lead generation queued for rules",
        )


@admin.register(LeadRequest)
class LeadRequestAdmin(ReadOnlyAdmin):
    list_display = ("event", "cursor", "lease_holder", "lease_until", "error_datetime")
    list_filter = ("error_datetime",)
    list_select_related = ("event",)
    readonly_fields = (
        "event",
        "rules",
        "cursor",
        "lease_holder",
        "lease_until",
        "fencing_token",
        "error_datetime",
        "error_message",
        "created_at",
    )


class ProvenanceRegistrationInline(ReadOnlyInline):
    model = LeadProvenanceRegistration
    fields = ("registration", "rule")
    readonly_fields = ("registration", "rule")


@admin.register(LeadProvenance)
class LeadProvenanceAdmin(ReadOnlyAdmin):
    list_display = ("lead_ref", "rule", "event", "basis", "group_key", "updated_at")
    list_filter = ("basis", "rule")
    search_fields = ("lead_ref", "group_key", "registration_rows__registration__email")
    list_select_related = ("rule", "event")
    readonly_fields = ("rule", "event", "lead_ref", "group_key", "basis", "created_at")
    inlines = [ProvenanceRegistrationInline]


@admin.register(LeadProvenanceRegistration)
class LeadProvenanceRegistrationAdmin(ReadOnlyAdmin):
    """Leads per registration: search a registration's id, email or name."""

    list_display = ("registration", "provenance", "rule")
    # A provenance shows as "<lead> ← <rule>": its own rule is read with the row, not per row.
    list_select_related = ("provenance__rule", "registration", "rule")
    search_fields = ("=registration__id", "registration__email", "registration__name")
    readonly_fields = ("provenance", "registration", "rule")


@admin.register(Lead)
class LeadAdmin(ReadOnlyAdmin):
    """The local lead sink's leads (EVENT_LEAD_SINK=leads.adapters.LocalLeadSink)."""

    list_display = (
        "name",
        "lead_type",
        "event",
        "contact_name",
        "email",
        "company_name",
        "created_at",
    )
    list_filter = ("lead_type", "event")
    search_fields = ("name", "contact_name", "email", "company_name")
    list_select_related = ("event",)
    readonly_fields = (
        "name",
        "lead_type",
        "event",
        "contact_name",
        "email",
        "phone",
        "company_name",
        "team_ref",
        "user_ref",
        "tag_refs",
        "utm",
        "description",
        "created_at",
        "updated_at",
    )


# --- the Event admin extension ---------------------------------------------------------------


def prefetch_lead_counts(events) -> None:
    counts = selectors.lead_counts([e.pk for e in events])
    for event in events:
        event._lead_count = counts[event.pk]


@admin.display(description="leads")
def lead_count(event) -> int:
    count = getattr(event, "_lead_count", None)
    if count is None:
        count = event._lead_count = selectors.lead_counts([event.pk])[event.pk]
    return count


@admin.display(description="leads")
def event_leads(event) -> str:
    if event.pk is None:
        return "—"
    rows = list(selectors.leads_for_event(event)[:50])
    if not rows:
        return "none yet"
    url = reverse("admin:leads_leadprovenance_changelist") + f"?event__id__exact={event.pk}"
    items = format_html_join(
        "",
        "<li>{} — {} ({} registrations)</li>",
        ((p.lead_ref, p.rule.name, p.registration_count) for p in rows),
    )
    return format_html('<ul>{}</ul><a href="{}">all leads of this event</a>', items, url)


@admin.action(
    description="Generate leads (walk every registration with all rules)", permissions=["change"]
)
def generate_leads_for_events(modeladmin, request, queryset):
    run_verb(
        modeladmin,
        request,
        queryset,
        lambda event: request_services.generate_leads(event=event, actor=request.user),
        "Lead generation queued for events",
    )


EVENT_EXTENSION = EventAdminExtension(
    name="leads",
    list_display=(lead_count,),
    readonly_fields=(event_leads,),
    actions=(generate_leads_for_events,),
    prefetch=prefetch_lead_counts,
)
