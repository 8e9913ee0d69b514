from django.contrib import admin

from leads.models import (
    Lead,
    LeadProvenance,
    LeadProvenanceRegistration,
    LeadRequest,
    LeadRule,
    LeadRulePredicate,
)


class PredicateInline(admin.TabularInline):
    model = LeadRulePredicate
    extra = 0


@admin.register(LeadRule)
class LeadRuleAdmin(admin.ModelAdmin):
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
    filter_horizontal = ("event_types",)
    inlines = [PredicateInline]


@admin.register(LeadRequest)
class LeadRequestAdmin(admin.ModelAdmin):
    list_display = ("event", "cursor", "lease_holder", "lease_until", "error_datetime")
    readonly_fields = (
        "cursor",
        "lease_holder",
        "lease_until",
        "fencing_token",
        "error_datetime",
        "error_message",
        "created_at",
    )
    list_select_related = ("event",)


class ProvenanceRegistrationInline(admin.TabularInline):
    model = LeadProvenanceRegistration
    extra = 0
    can_delete = False
    readonly_fields = ("registration", "rule")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(LeadProvenance)
class LeadProvenanceAdmin(admin.ModelAdmin):
    list_display = ("lead_ref", "rule", "event", "basis", "group_key", "updated_at")
    list_filter = ("basis", "rule")
    search_fields = ("lead_ref", "group_key")
    list_select_related = ("rule", "event")
    readonly_fields = (
        "rule",
        "event",
        "lead_ref",
        "group_key",
        "basis",
        "created_at",
        "updated_at",
    )
    inlines = [ProvenanceRegistrationInline]


@admin.register(Lead)
class LeadAdmin(admin.ModelAdmin):
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


@admin.register(LeadRulePredicate)
class LeadRulePredicateAdmin(admin.ModelAdmin):
    list_display = ("rule", "field", "op", "value", "sequence")
    list_select_related = ("rule",)
    list_filter = ("field",)


@admin.register(LeadProvenanceRegistration)
class LeadProvenanceRegistrationAdmin(admin.ModelAdmin):
    list_display = ("provenance", "registration", "rule")
    list_select_related = ("provenance", "registration", "rule")
    readonly_fields = ("provenance", "registration", "rule")

    def has_add_permission(self, request):
        return False
