"""The leads overlay's part of `manage.py seed_demo` (hook `events.hooks.seed_demo`): two rules
on the demo summit and the leads the pass makes of its registrations. Once only."""

from typing import Any

from events.services.audit import Actor
from leads import services
from leads.adapters import LocalLeadSink
from leads.models import LeadRule

ACTOR = Actor("system", label="seed_demo")
ATTENDEE_RULE = "Summit: every confirmed attendee"
ORDER_RULE = "Summit: one opportunity per order"


def seed_demo(*, summit, stdout=None, **_: Any) -> None:
    if LeadRule.objects.filter(name__in=[ATTENDEE_RULE, ORDER_RULE]).exists():
        return
    services.create_rule(
        name=ATTENDEE_RULE,
        lead_creation_basis="attendee",
        lead_creation_trigger="confirm",
        lead_type="lead",
        event=summit,
        team_ref="TEAM-EVENTS",
        tag_refs=["summit", "attendee"],
        predicates=[{"field": "state", "op": "in", "value": ["open", "done"]}],
        actor=ACTOR,
    )
    services.create_rule(
        name=ORDER_RULE,
        lead_creation_basis="order",
        lead_creation_trigger="create",
        lead_type="opportunity",
        event=summit,
        team_ref="TEAM-SALES",
        tag_refs=["summit", "order"],
        predicates=[{"field": "company_name", "op": "is_set", "value": None}],
        actor=ACTOR,
    )
    services.generate_leads(event=summit, actor=ACTOR)
    # The demo shows leads whatever EVENT_LEAD_SINK says: the built-in sink writes them.
    report = services.run_pass(sink=LocalLeadSink())
    if stdout is not None:
        stdout.write(f"leads: 2 rules on '{summit.name}'; {report}")
