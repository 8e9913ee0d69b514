"""Typed CRM lead rules schema (spec-overlay.md §3) and the local lead sink's table."""

from django.db import models

from events.models import Event, EventType, Registration


class LeadBasis(models.TextChoices):
    ATTENDEE = "attendee", "Per attendee"
    ORDER = "order", "Per order"


class LeadTrigger(models.TextChoices):
    CREATE = "create", "Registration created"
    CONFIRM = "confirm", "Registration confirmed"
    DONE = "done", "Attended"


class LeadType(models.TextChoices):
    LEAD = "lead", "Lead"
    OPPORTUNITY = "opportunity", "Opportunity"


class LeadRule(models.Model):
    name = models.CharField(max_length=255)
    active = models.BooleanField(default=True)
    lead_creation_basis = models.CharField(
        max_length=8, choices=LeadBasis.choices, default=LeadBasis.ATTENDEE
    )
    lead_creation_trigger = models.CharField(
        max_length=8, choices=LeadTrigger.choices, default=LeadTrigger.CREATE
    )
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.CASCADE, related_name="lead_rules"
    )
    event_types = models.ManyToManyField(EventType, blank=True, related_name="lead_rules")
    lead_type = models.CharField(max_length=12, choices=LeadType.choices, default=LeadType.LEAD)
    team_ref = models.CharField(max_length=128, blank=True)
    user_ref = models.CharField(max_length=128, blank=True)
    tag_refs = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("name", "id")
        verbose_name = "lead rule"
        verbose_name_plural = "lead rules"

    def __str__(self) -> str:
        return self.name


class LeadRulePredicate(models.Model):
    rule = models.ForeignKey(LeadRule, on_delete=models.CASCADE, related_name="predicates")
    field = models.CharField(max_length=32)
    op = models.CharField(max_length=16)
    value = models.JSONField(null=True, blank=True)
    sequence = models.IntegerField(default=10)

    class Meta:
        ordering = ("sequence", "id")
        verbose_name = "rule condition"
        verbose_name_plural = "rule conditions"

    def __str__(self) -> str:
        return f"{self.field} {self.op} {self.value!r}"


class LeadRequest(models.Model):
    event = models.OneToOneField(Event, on_delete=models.CASCADE, related_name="lead_request")
    rules = models.ManyToManyField(LeadRule, blank=True, related_name="requests")
    cursor = models.BigIntegerField(default=0)
    lease_holder = models.CharField(max_length=128, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    fencing_token = models.BigIntegerField(default=0)
    error_datetime = models.DateTimeField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created_at", "id")
        verbose_name = "lead request"
        verbose_name_plural = "lead requests"

    def __str__(self) -> str:
        return f"lead request for {self.event_id} at {self.cursor}"


class LeadProvenance(models.Model):
    rule = models.ForeignKey(LeadRule, on_delete=models.CASCADE, related_name="provenances")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="lead_provenances")
    lead_ref = models.CharField(max_length=128, db_index=True)
    group_key = models.CharField(max_length=160)
    basis = models.CharField(max_length=8, choices=LeadBasis.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at", "id")
        verbose_name = "lead provenance record"
        verbose_name_plural = "lead provenance records"
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "event", "group_key"], name="lead_provenance_group"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lead_ref} ← {self.rule}"


class LeadProvenanceRegistration(models.Model):
    provenance = models.ForeignKey(
        LeadProvenance, on_delete=models.CASCADE, related_name="registration_rows"
    )
    registration = models.ForeignKey(
        Registration, on_delete=models.CASCADE, related_name="lead_rows"
    )
    rule = models.ForeignKey(LeadRule, on_delete=models.CASCADE, related_name="+")

    class Meta:
        verbose_name = "lead attendee row"
        verbose_name_plural = "lead attendee rows"
        constraints = [
            models.UniqueConstraint(fields=["rule", "registration"], name="lead_rule_registration"),
        ]


class Lead(models.Model):
    """The local lead sink's table: leads created when no host CRM is wired."""

    name = models.CharField(max_length=255)
    lead_type = models.CharField(max_length=12, choices=LeadType.choices)
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="local_leads"
    )
    contact_name = models.CharField(max_length=255, blank=True)
    email = models.CharField(max_length=254, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    company_name = models.CharField(max_length=255, blank=True)
    team_ref = models.CharField(max_length=128, blank=True)
    user_ref = models.CharField(max_length=128, blank=True)
    tag_refs = models.JSONField(default=list, blank=True)
    utm = models.JSONField(default=dict, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at", "id")
        verbose_name = "lead"
        verbose_name_plural = "leads"

    def __str__(self) -> str:
        return self.name
