"""The local sink is an EventLeadSink wired by .env.example; the port's own default refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from events import ports
from events.errors import NotFound, PortNotWired
from leads.adapters import LocalLeadSink
from leads.models import Lead

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_wires_the_local_lead_sink():
    lines = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert lines["EVENT_LEAD_SINK"] == "leads.adapters.LocalLeadSink"


def test_the_port_default_is_still_the_refusing_one():
    assert ports.PORTS["EVENT_LEAD_SINK"][1] is ports.RefusingLeadSink
    with pytest.raises(PortNotWired) as refused:
        ports.RefusingLeadSink().upsert_lead(lead_ref=None, values={})
    assert refused.value.code == "port_not_wired"


@pytest.mark.django_db
def test_the_local_sink_is_resolved_and_writes_then_updates_a_lead():
    with override_settings(EVENT_LEAD_SINK="leads.adapters.LocalLeadSink"):
        sink = ports.lead_sink()
        assert isinstance(sink, LocalLeadSink)
        assert [w.status for w in ports.wiring() if w.setting == "EVENT_LEAD_SINK"] == ["wired"]
    ref = sink.upsert_lead(
        lead_ref=None,
        values={"name": "Summit – Ada", "lead_type": "lead", "tag_refs": ["x"], "utm": {}},
    )
    assert ref.startswith("local:")
    again = sink.upsert_lead(
        lead_ref=ref, values={"name": "Summit – Ada L.", "lead_type": "opportunity"}
    )
    assert again == ref
    (lead,) = Lead.objects.all()
    assert (lead.name, lead.lead_type, f"local:{lead.pk}") == (
        "Summit – Ada L.",
        "opportunity",
        ref,
    )
    with pytest.raises(NotFound) as missing:
        sink.upsert_lead(lead_ref="local:999999999", values={"name": "x", "lead_type": "lead"})
    assert missing.value.code == "not_found"
