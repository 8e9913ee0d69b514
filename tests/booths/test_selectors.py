"""Reads of the booths overlay: counts for many events in one query."""

from __future__ import annotations

import pytest

from booths import selectors
from booths.services import block_booth
from tests.booths import factories
from tests.events import factories as event_factories

pytestmark = pytest.mark.django_db


def test_booth_counts_per_event_in_one_query(django_assert_num_queries, actor):
    events = event_factories.EventFactory.create_batch(3)
    factories.BoothFactory.create_batch(3, event=events[0])
    block_booth(booth=factories.BoothFactory(event=events[0]), actor=actor)
    factories.BoothFactory(event=events[1])
    with django_assert_num_queries(1):
        counts = selectors.booth_counts(event_ids=[e.pk for e in events])
    assert counts == {
        events[0].pk: selectors.BoothCounts(total=4, available=3),
        events[1].pk: selectors.BoothCounts(total=1, available=1),
        events[2].pk: selectors.BoothCounts(total=0, available=0),
    }
    assert str(counts[events[0].pk]) == "3 / 4"
    assert str(counts[events[2].pk]) == "—"


def test_missing_booths_names_the_unknown_ids():
    booth = factories.BoothFactory()
    assert selectors.missing_booths(booth_ids=[booth.pk, 999_998, 999_999]) == [999_998, 999_999]
