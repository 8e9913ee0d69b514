"""The handler for booth lines of host orders (`booths.sale.sale_order_lines`), driven with the
seam's own message types: confirm all or none, paid, cancel, unknown booths; replays are no-ops.

It is shaped for `events.hooks.sale_order_lines["booth"]`; the seam's end-to-end tests (tickets
and booths in one transaction, parking) come with the wiring."""

from __future__ import annotations

from decimal import Decimal

import pytest

from booths.models import Booth
from booths.sale import sale_order_lines
from events.errors import DomainError
from seams.messages import LineData, OrderData, PartnerData
from tests.booths import factories
from tests.booths.helpers import booths_snapshot

pytestmark = pytest.mark.django_db

PARTNER = PartnerData(ref="P7", name="Acme", email="booths@acme.example", phone="+3225550000")


def order(ref: str, *booth_lines: tuple[int, ...]) -> tuple[OrderData, list[LineData]]:
    ticket = LineData(
        ref=f"{ref}/1", kind="ticket", price_total=Decimal("0"), ticket_id=1, quantity=1
    )
    lines = [
        LineData(ref=f"{ref}/{i + 2}", kind="booth", price_total=Decimal("900"), booth_ids=ids)
        for i, ids in enumerate(booth_lines)
    ]
    data = OrderData(
        ref=ref,
        version=1,
        amount_total=Decimal("900"),
        currency="EUR",
        partner=PARTNER,
        lines=(ticket, *lines),
    )
    return data, lines


def test_confirm_paid_cancel(actor):
    a, b = factories.BoothFactory.create_batch(2)
    data, lines = order("SO42", (a.pk,), (b.pk,))

    summary = sale_order_lines(effect="confirm", order=data, lines=lines, actor="seam")
    assert summary == {
        "booths": {"confirmed": [a.pk, b.pk], "released": [], "cancelled_order_refs": []}
    }
    a.refresh_from_db()
    assert (a.state, a.order_ref, a.order_line_ref, a.partner_ref, a.contact_name) == (
        "unavailable",
        "SO42",
        "SO42/2",
        "P7",
        "Acme",
    )
    before = booths_snapshot()
    sale_order_lines(effect="confirm", order=data, lines=lines, actor="seam")  # a replay
    assert booths_snapshot() == before

    assert sale_order_lines(effect="paid", order=data, lines=lines, actor="seam") == {
        "booths": {"paid": [a.pk, b.pk]}
    }
    assert set(Booth.objects.values_list("is_paid", flat=True)) == {True}

    assert sale_order_lines(effect="cancel", order=data, lines=[], actor="seam") == {
        "booths": {"released": [a.pk, b.pk]}
    }
    assert set(Booth.objects.values_list("state", "order_ref", "is_paid")) == {
        ("available", "", False)
    }


def test_one_booth_taken_books_none_and_names_it(actor):
    free, taken = factories.BoothFactory.create_batch(2)
    first, first_lines = order("SO1", (taken.pk,))
    sale_order_lines(effect="confirm", order=first, lines=first_lines, actor="seam")
    data, lines = order("SO2", (free.pk, taken.pk))
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        sale_order_lines(effect="confirm", order=data, lines=lines, actor="seam")
    assert (info.value.code, info.value.details["booths"]) == ("booth_unavailable", [taken.pk])
    assert booths_snapshot() == before


def test_an_unknown_booth_is_unknown_reference_naming_the_line(actor):
    booth = factories.BoothFactory()
    data, lines = order("SO1", (booth.pk,), (booth.pk, 999_999))
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        sale_order_lines(effect="confirm", order=data, lines=lines, actor="seam")
    assert info.value.code == "unknown_reference"
    assert info.value.details["path"] == "data.order.lines[2].booth_ids"
    assert info.value.details["booths"] == [999_999]
    assert booths_snapshot() == before


def test_an_order_without_booth_lines_changes_nothing(actor):
    factories.BoothFactory()
    data, lines = order("SO1")
    before = booths_snapshot()
    for effect in ("confirm", "paid", "cancel"):
        sale_order_lines(effect=effect, order=data, lines=lines, actor="seam")
    assert booths_snapshot() == before
