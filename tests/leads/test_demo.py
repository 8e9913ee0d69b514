"""`manage.py seed_demo` shows the leads overlay: two rules on the demo summit and their leads
(made by the pass with the built-in sink); running it again changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from leads.demo import ATTENDEE_RULE, ORDER_RULE
from leads.models import Lead, LeadProvenance, LeadRule


@pytest.mark.django_db
def test_seed_demo_has_two_rules_and_their_leads():
    out = StringIO()
    with override_settings(EVENT_LEAD_SINK="events.ports.RefusingLeadSink"):
        call_command("seed_demo", stdout=out)
    rules = {r.name: r for r in LeadRule.objects.all()}
    assert set(rules) == {ATTENDEE_RULE, ORDER_RULE}
    assert LeadProvenance.objects.filter(rule=rules[ATTENDEE_RULE]).exists()
    assert LeadProvenance.objects.filter(rule=rules[ORDER_RULE]).exists()
    assert Lead.objects.count() == LeadProvenance.objects.count() > 0
    assert "leads: 2 rules" in out.getvalue()

    counts = (LeadRule.objects.count(), Lead.objects.count())
    call_command("seed_demo", stdout=StringIO())
    assert (LeadRule.objects.count(), Lead.objects.count()) == counts
