"""factory-boy factories for the leads overlay's models (rows of a given shape; behaviour goes
through services)."""

from __future__ import annotations

import factory

from leads import models as leads
from tests.events.factories import EventFactory, RegistrationFactory


class LeadRuleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.LeadRule

    name = factory.Sequence(lambda n: f"Rule {n}")


class LeadRulePredicateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.LeadRulePredicate

    rule = factory.SubFactory(LeadRuleFactory)
    field = "state"
    op = "in"
    value = ["open"]


class LeadRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.LeadRequest

    event = factory.SubFactory(EventFactory)


class LeadProvenanceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.LeadProvenance

    rule = factory.SubFactory(LeadRuleFactory)
    event = factory.SubFactory(EventFactory)
    lead_ref = factory.Sequence(lambda n: f"lead-{n}")
    group_key = factory.Sequence(lambda n: f"group-{n}")
    basis = leads.LeadBasis.ATTENDEE


class LeadProvenanceRegistrationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.LeadProvenanceRegistration

    provenance = factory.SubFactory(LeadProvenanceFactory)
    registration = factory.SubFactory(
        RegistrationFactory, event=factory.SelfAttribute("..provenance.event")
    )
    rule = factory.SelfAttribute("provenance.rule")


class LeadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = leads.Lead

    name = factory.Sequence(lambda n: f"Lead {n}")
    lead_type = leads.LeadType.LEAD
