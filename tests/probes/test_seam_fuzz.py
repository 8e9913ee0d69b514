"""Sale seam under property-based fuzzing: bodies and headers from hypothesis.

Properties: the seam never answers 500 (except where a failure is injected, and then nothing
is stored); every refusal before the inbox (400, 401, 413, 503) writes nothing; a 200 or 409
writes exactly one inbox row or (duplicate) none, and only `applied` has an effect.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client, override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from events.models import EventAuditLog, Registration
from seams.models import SeamInbox, SeamOrder
from tests.events import factories as ev
from tests.seams.host import URL, new_secret, signed_headers

SECRET = new_secret()
FUZZ = settings(
    max_examples=60,
    database=None,  # no .hypothesis/ example store in the checkout
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
plain = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=30)
text = plain | plain | plain | st.sampled_from(["", " ", "a\x00b", "\ud800", "x" * 300])


def paths(value, prefix=()):
    """Every (container path, key) of a document, to corrupt one at a time."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


def corrupt(data, document):
    """Replace or drop up to two values of the document, chosen by hypothesis."""
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
        candidates = list(paths(document))
        if not candidates:
            return document
        path = data.draw(st.sampled_from(candidates))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(junk)
    return document


def partner_s():
    return st.fixed_dictionaries(
        {"ref": (st.sampled_from(["P7", "P8"])), "name": (text), "email": (text)},
        optional={"phone": (text), "company_name": (text)},
    )


def line_s(ticket_id: int):
    ticket = st.fixed_dictionaries(
        {
            "ref": (st.sampled_from(["L/1", "L/2", "L/3"])),
            "kind": (st.just("ticket")),
            "ticket_id": st.sampled_from([ticket_id, ticket_id, ticket_id + 999]),
            "quantity": st.integers(min_value=0, max_value=4),
            "price_total": st.sampled_from(["0", "10.00", "12.5"]),
        },
        optional={
            "slot_id": st.none(),
            "attendees": (
                st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "name": (text),
                            "email": (text),
                            "answers": st.dictionaries(st.text(max_size=3), text, max_size=2),
                        },
                    ),
                    max_size=1,
                )
            ),
        },
    )
    booth = st.fixed_dictionaries(
        {
            "ref": st.just("B/1"),
            "kind": st.just("booth"),
            "booth_ids": st.lists(st.integers(1, 9), min_size=1, max_size=3),
            "price_total": st.just("5"),
        }
    )
    return ticket | booth


def message_s(ticket_id: int):
    order = st.fixed_dictionaries(
        {
            "ref": (st.sampled_from(["SO1", "SO2"])),
            "version": st.integers(min_value=1, max_value=6),
            "amount_total": st.sampled_from(["0.00", "120.00", "7"]),
            "currency": (st.just("EUR")),
            "partner": (partner_s()),
            "lines": (st.lists(line_s(ticket_id), max_size=3, unique_by=lambda line: line["ref"])),
        },
        optional={"utm": (st.dictionaries(st.sampled_from(["source", "x"]), text))},
    )
    order_msg = st.fixed_dictionaries(
        {
            "type": (st.sampled_from(["order.confirmed", "order.paid", "order.cancelled", "nope"])),
            "data": (st.fixed_dictionaries({"order": order})),
        }
    )
    partner_msg = st.fixed_dictionaries(
        {
            "type": st.just("partner.updated"),
            "data": (st.fixed_dictionaries({"partner": partner_s()})),
        }
    )
    return order_msg | partner_msg


def counts() -> tuple[int, ...]:
    return (
        SeamInbox.objects.count(),
        SeamOrder.objects.count(),
        Registration.objects.count(),
        EventAuditLog.objects.count(),
    )


def check(response, before) -> None:
    event(f"status {response.status_code}")
    assert response.status_code != 500, response.content
    after = counts()
    if response.status_code in (400, 401, 413, 503):
        assert after == before, response.content
    else:
        assert response.status_code in (200, 409), response.content
        status = response.json()["status"]
        assert after[0] == before[0] + (0 if status == "duplicate" else 1)
        if status != "applied":
            # duplicate, stale, parked: the message had no effect (no version, no registration)
            assert after[1:3] == before[1:3], (status, response.content)
        if status == "duplicate":
            assert after == before


@pytest.fixture
def ticket_id(db) -> int:
    return ev.TicketFactory(seats_max=3).pk


@pytest.mark.django_db
@override_settings(EVENT_SEAM_SECRET=SECRET)
@FUZZ
@given(data=st.data())
def test_fuzzed_signed_bodies_never_500_and_refusals_write_nothing(ticket_id, data):
    document = corrupt(data, data.draw(message_s(ticket_id)))
    try:
        body = json.dumps(document).encode()
    except ValueError:
        return  # not encodable by json.dumps (e.g. a NaN key): the host could not send it
    if data.draw(st.booleans()):
        body = body.replace(b'"SO1"', b'"SO1"' * data.draw(st.integers(0, 2)))
    msg_id = data.draw(st.sampled_from(["msg_a", "msg_b"]) | st.text(min_size=1, max_size=300))
    try:
        headers = signed_headers(body, secret=SECRET, msg_id=msg_id)
    except UnicodeEncodeError:
        return  # the host library cannot sign an id that is not Unicode text
    before = counts()
    check(
        Client(raise_request_exception=False).post(
            URL, data=body, content_type="application/json", headers=headers
        ),
        before,
    )


@pytest.mark.django_db
@override_settings(EVENT_SEAM_SECRET=SECRET)
@FUZZ
@given(
    body=st.binary(max_size=200) | st.just(b'{"type": "order.paid"}'),
    msg_id=st.none() | st.text(max_size=50),
    timestamp=st.none()
    | st.text(max_size=20)
    | st.integers(min_value=-(2**40), max_value=2**40).map(str)
    | st.floats().map(str),
    signature=st.none()
    | st.text(max_size=120)
    | st.lists(st.sampled_from(["v1,", "v2,", "v1,AAAA", ",", " ", "v1,@@", "=="]), max_size=4).map(
        "".join
    ),
    fresh=st.booleans(),
)
def test_fuzzed_headers_never_500_and_write_nothing(db, body, msg_id, timestamp, signature, fresh):
    headers = {}
    for name, value in (
        ("webhook-id", msg_id),
        ("webhook-timestamp", timestamp),
        ("webhook-signature", signature),
    ):
        if value is not None:
            headers[name] = value.encode("latin-1", "replace").decode("latin-1")
    if fresh and msg_id:
        # a correctly signed id/timestamp for another body: still refused
        good = signed_headers(b"{}", secret=SECRET, msg_id="x")
        headers["webhook-timestamp"] = good["webhook-timestamp"]
    before = counts()
    response = Client(raise_request_exception=False).post(
        URL, data=body, content_type="application/json", headers=headers
    )
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "invalid_signature"
    assert counts() == before


@pytest.mark.django_db
@override_settings(EVENT_SEAM_SECRET=SECRET)
@FUZZ
@given(data=st.data())
def test_an_injected_failure_is_the_only_500_and_stores_nothing(ticket_id, data, monkeypatch):
    from events.services import orders

    def boom(**kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(orders, "set_paid", boom)
    quantity = data.draw(st.integers(min_value=0, max_value=3))
    document = {
        "type": "order.paid",
        "data": {
            "order": {
                "ref": data.draw(st.sampled_from(["SO1", "SO2", "SO3"])),
                "version": data.draw(st.integers(min_value=1, max_value=5)),
                "amount_total": "10.00",
                "currency": "EUR",
                "partner": {"ref": "P7", "name": "P", "email": "p@example.org"},
                "lines": [
                    {
                        "ref": "L/1",
                        "kind": "ticket",
                        "ticket_id": ticket_id,
                        "quantity": quantity,
                        "price_total": "10.00",
                    }
                ],
            }
        },
    }
    body = json.dumps(document).encode()
    before = counts()
    at = datetime.now(tz=UTC) - timedelta(seconds=data.draw(st.integers(0, 200)))
    response = Client(raise_request_exception=False).post(
        URL,
        data=body,
        content_type="application/json",
        headers=signed_headers(body, secret=SECRET, at=at),
    )
    assert response.status_code == 500, response.content
    assert response.json()["error"]["code"] == "server_error"
    assert counts() == before
