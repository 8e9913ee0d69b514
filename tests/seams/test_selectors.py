"""seams/selectors.py: the tickets a message names, with their events — by the ORM's queryset or
by the kept statement a caller sends with others — never an event type's template line."""

from __future__ import annotations

import pytest
from django.db import connection

from seams import selectors
from tests.events import factories

pytestmark = pytest.mark.django_db


def values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_the_statement_and_the_queryset_find_the_same_tickets_and_events(
    django_assert_num_queries,
):
    first = factories.TicketFactory(price="30.00")
    second = factories.TicketFactory(event=first.event)
    template = factories.TypeTicketFactory()
    ids = [second.pk, first.pk, template.pk, first.pk, 10**9]

    with django_assert_num_queries(1):
        by_id = selectors.tickets_by_id(ids)
    sql, params = selectors.tickets_statement(ids)
    assert params == sorted({first.pk, second.pk, template.pk, 10**9})
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = selectors.tickets_found(cursor.fetchall())

    for tickets in (by_id, found):
        assert set(tickets) == {first.pk, second.pk}  # no template line, no unknown id
        with django_assert_num_queries(0):
            events = {pk: ticket.event for pk, ticket in tickets.items()}
        for pk, ticket in tickets.items():
            assert values(ticket) == values(type(ticket).objects.get(pk=pk))
            assert values(events[pk]) == values(first.event)
    assert (
        selectors.tickets_statement([first.pk, second.pk])[0]
        == selectors.tickets_statement([template.pk, 10**9])[0]
    )  # one kept statement per number of ids
