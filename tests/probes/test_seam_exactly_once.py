"""Sale seam, exactly once (spec-overlay.md §1.3): 20 identical copies of one signed message,
posted at the same instant from 20 threads, have exactly one effect; the 19 others answer
`duplicate`. A second race: 20 different messages of one order, versions 1…20, converge on the
highest version whatever order they commit in."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from django.db import connection
from django.test import Client

from events.models import Registration
from seams.models import InboxStatus, SeamInbox, SeamOrder
from tests.events import factories as ev
from tests.seams.host import URL, new_secret, order_message, signed_headers, ticket_line

THREADS = 20
JOIN_TIMEOUT = 120


def post_all(requests: list[tuple[bytes, dict]]) -> list[object]:
    barrier = threading.Barrier(len(requests))
    outcomes: list[object] = [None] * len(requests)

    def worker(index: int) -> None:
        body, headers = requests[index]
        client = Client(raise_request_exception=False)
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            response = client.post(URL, data=body, content_type="application/json", headers=headers)
            outcomes[index] = (response.status_code, response.json().get("status"))
        except Exception as exc:  # noqa: BLE001 - recorded and asserted by the test
            outcomes[index] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a sender is stuck (deadlock?)"
    return outcomes


@pytest.fixture
def secret(settings) -> str:
    settings.EVENT_SEAM_SECRET = new_secret()
    return settings.EVENT_SEAM_SECRET


@pytest.mark.django_db(transaction=True)
def test_twenty_identical_copies_at_once_have_one_effect(secret):
    ticket = ev.TicketFactory(seats_max=50)
    body = json.dumps(order_message(lines=[ticket_line(ticket, 2)])).encode()
    headers = signed_headers(body, secret=secret, msg_id="msg_race")
    outcomes = post_all([(body, headers)] * THREADS)
    assert Counter(outcomes) == Counter({(200, "applied"): 1, (200, "duplicate"): THREADS - 1}), (
        outcomes
    )
    assert Registration.objects.filter(ticket=ticket).count() == 2
    assert SeamInbox.objects.get().status == InboxStatus.APPLIED


@pytest.mark.django_db(transaction=True)
def test_twenty_versions_of_one_order_at_once_converge(secret):
    ticket = ev.TicketFactory(seats_max=100)
    requests = []
    for version in range(1, THREADS + 1):
        body = json.dumps(
            order_message(version=version, lines=[ticket_line(ticket, version)])
        ).encode()
        requests.append((body, signed_headers(body, secret=secret)))
    outcomes = post_all(requests)
    assert all(o in ((200, "applied"), (200, "stale")) for o in outcomes), outcomes
    assert SeamOrder.objects.get().version == THREADS
    # whatever the commit order, the quantity of the highest applied version holds
    assert Registration.objects.filter(ticket=ticket, state="open").count() == THREADS
    assert SeamInbox.objects.count() == THREADS
