"""Booth categories and template lines are written by their verbs, audited; a category in use
is never deleted."""

from __future__ import annotations

from decimal import Decimal

import pytest

from booths.models import BoothCategory, TypeBooth
from booths.services import config
from events.errors import DomainError
from events.models import EventAuditLog
from tests.booths import factories
from tests.booths.helpers import booths_snapshot
from tests.events import factories as event_factories

pytestmark = pytest.mark.django_db


def test_a_category_is_created_updated_and_deleted_with_audit_rows(actor):
    category = config.create_booth_category(actor=actor, name="Island", price=Decimal("1500"))
    config.update_booth_category(category=category, actor=actor, price=Decimal("1200"))
    config.update_booth_category(category=category, actor=actor, price=Decimal("1200"))  # no-op
    config.delete_booth_category(category=category, actor=actor)
    assert not BoothCategory.objects.exists()
    assert list(EventAuditLog.objects.order_by("pk").values_list("verb", flat=True)) == [
        "booth_category.created",
        "booth_category.updated",
        "booth_category.deleted",
    ]


@pytest.mark.parametrize("used_by", ["booth", "template line"])
def test_a_category_in_use_is_not_deleted(used_by, actor):
    category = factories.BoothCategoryFactory()
    if used_by == "booth":
        factories.BoothFactory(booth_category=category)
    else:
        factories.TypeBoothFactory(booth_category=category)
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        config.delete_booth_category(category=category, actor=actor)
    assert info.value.code == "invalid_value"
    assert booths_snapshot() == before
    assert BoothCategory.objects.filter(pk=category.pk).exists()


@pytest.mark.parametrize(
    "fields", [{"price": Decimal("-1")}, {"name": " "}, {"product": "x"}], ids=str
)
def test_a_bad_category_is_refused(fields, actor):
    with pytest.raises(DomainError) as info:
        config.create_booth_category(actor=actor, **{"name": "Island", **fields})
    assert info.value.code == "invalid_value"
    assert not BoothCategory.objects.exists()


def test_template_lines_are_written_under_their_type(actor):
    event_type = event_factories.EventTypeFactory()
    category = factories.BoothCategoryFactory()
    line = config.create_type_booth(
        event_type=event_type, actor=actor, name="A1", booth_category=category
    )
    config.update_type_booth(line=line, actor=actor, name="A1 corner")
    assert TypeBooth.objects.get(pk=line.pk).name == "A1 corner"
    other_type = event_factories.EventTypeFactory()
    with pytest.raises(DomainError) as info:
        config.update_type_booth(line=line, actor=actor, event_type=other_type)
    assert info.value.code == "invalid_value"
    config.delete_type_booth(line=line, actor=actor)
    assert list(EventAuditLog.objects.order_by("pk").values_list("verb", flat=True)) == [
        "type_booth.created",
        "type_booth.updated",
        "type_booth.deleted",
    ]
