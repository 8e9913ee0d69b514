"""The seam's transport: the checks of spec-overlay.md §1.1 in their order, nothing stored on
a refusal; secret rotation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from events.models import EventAuditLog, Registration
from seams.models import SeamInbox, SeamOrder
from tests.seams.host import Host, new_secret, order_message, signed_headers, ticket_line

pytestmark = pytest.mark.django_db


def stored() -> tuple[int, int, int, int]:
    return (
        SeamInbox.objects.count(),
        SeamOrder.objects.count(),
        Registration.objects.count(),
        EventAuditLog.objects.count(),
    )


def assert_refused(response, status: int, code: str | None, before) -> None:
    assert response.status_code == status, response.content
    if code is not None:
        assert response.json()["error"]["code"] == code
    assert stored() == before


def test_secret_missing_answers_503(settings, ticket):
    settings.EVENT_SEAM_SECRET = "   "
    before = stored()
    response = Host(new_secret()).post(order_message(lines=[ticket_line(ticket, 1)]))
    assert_refused(response, 503, "secret_missing", before)


def test_missing_headers_and_bad_signatures_are_invalid_signature(host, ticket):
    document = order_message(lines=[ticket_line(ticket, 1)])
    body = json.dumps(document).encode()
    good = signed_headers(body, secret=host.secret)
    before = stored()
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        headers = {k: v for k, v in good.items() if k != header}
        assert_refused(host.post(document, headers=headers), 401, "invalid_signature", before)
    for bad in (
        {**good, "webhook-signature": "v1,AAAA"},
        {**good, "webhook-signature": "v2," + good["webhook-signature"][3:]},
        {**good, "webhook-id": good["webhook-id"] + "x"},  # signed for another id
        {**good, "webhook-timestamp": "soon"},
    ):
        assert_refused(host.post(document, headers=bad), 401, "invalid_signature", before)
    other = signed_headers(body, secret=new_secret())
    assert_refused(host.post(document, headers=other), 401, "invalid_signature", before)
    # the body is part of what is signed
    tampered = json.dumps(order_message(lines=[ticket_line(ticket, 2)])).encode()
    assert_refused(host.post(None, body=tampered, headers=good), 401, "invalid_signature", before)


# +305, not +301: the header carries whole seconds (floored), so a future timestamp only 301 s
# ahead can be within 300 s of the server's clock by the time the request is checked.
@pytest.mark.parametrize("offset", [-301, 305, -3600, 3600])
def test_old_or_future_timestamp_is_stale(host, ticket, offset):
    before = stored()
    at = datetime.now(tz=UTC) + timedelta(seconds=offset)
    response = host.post(order_message(lines=[ticket_line(ticket, 1)]), at=at)
    assert_refused(response, 401, "stale_timestamp", before)


def test_a_bad_signature_is_named_before_a_stale_timestamp(host, ticket):
    """Order of checks: signature first. The library checks the timestamp first."""
    before = stored()
    at = datetime.now(tz=UTC) - timedelta(hours=1)
    response = host.post(order_message(lines=[ticket_line(ticket, 1)]), at=at, secret=new_secret())
    assert_refused(response, 401, "invalid_signature", before)


def test_a_fresh_enough_timestamp_passes(host, ticket):
    at = datetime.now(tz=UTC) - timedelta(seconds=280)
    response = host.post(order_message(lines=[ticket_line(ticket, 1)]), at=at)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "applied"


def test_body_over_256_kib_is_413_after_the_signature(host, ticket):
    document = order_message(lines=[ticket_line(ticket, 1)])
    document["padding"] = "x" * (256 * 1024)
    before = stored()
    assert_refused(host.post(document), 413, "payload_too_large", before)
    # unsigned, the same body is refused for its signature first
    body = json.dumps(document).encode()
    headers = {**signed_headers(body, secret=host.secret), "webhook-signature": "v1,AAAA"}
    assert_refused(host.post(None, body=body, headers=headers), 401, "invalid_signature", before)


def test_each_check_wins_over_every_later_one(settings, host, ticket):
    """Order of §1.1 on requests that fail several checks at once: secret, signature,
    timestamp, size, schema — the earliest failing check names the answer."""
    oversized_junk = b"[" + b" " * (256 * 1024) + b"not json"
    old = datetime.now(tz=UTC) - timedelta(hours=1)
    before = stored()
    # timestamp before size and schema
    response = host.post(None, body=oversized_junk, at=old)
    assert_refused(response, 401, "stale_timestamp", before)
    # size before schema
    response = host.post(None, body=oversized_junk)
    assert_refused(response, 413, "payload_too_large", before)
    # signature before size and schema
    headers = {**signed_headers(oversized_junk, secret=host.secret), "webhook-signature": "v1,AA"}
    response = host.post(None, body=oversized_junk, headers=headers)
    assert_refused(response, 401, "invalid_signature", before)
    # the secret before everything
    settings.EVENT_SEAM_SECRET = ""
    response = host.post(None, body=oversized_junk, at=old)
    assert_refused(response, 503, "secret_missing", before)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d.update(type="order.shipped"), "type"),
        (lambda d: d.pop("data"), "data"),
        (lambda d: d["data"]["order"].pop("version"), "data.order.version"),
        (lambda d: d["data"]["order"].update(version="3"), "data.order.version"),
        (lambda d: d["data"]["order"].update(amount_total="lots"), "data.order.amount_total"),
        (lambda d: d["data"]["order"]["partner"].pop("ref"), "data.order.partner.ref"),
        (
            lambda d: d["data"]["order"]["lines"][0].update(quantity=-1),
            "data.order.lines[0].quantity",
        ),
        (lambda d: d["data"]["order"]["lines"][0].update(kind="cake"), "data.order.lines[0].kind"),
        (
            lambda d: d["data"]["order"]["lines"][0].update(attendees=[{"name": 3}]),
            "data.order.lines[0].attendees[0].name",
        ),
        (lambda d: d["data"]["order"]["partner"].update(name="a\x00b"), "data.order.partner.name"),
    ],
)
def test_schema_refusals_name_the_failing_path(host, ticket, mutate, path):
    document = order_message(lines=[ticket_line(ticket, 1)])
    mutate(document)
    before = stored()
    response = host.post(document)
    assert_refused(response, 400, "malformed_message", before)
    assert response.json()["error"]["path"] == path


def test_a_body_that_is_not_json_is_malformed(host):
    before = stored()
    response = host.post(None, body=b"{not json")
    assert_refused(response, 400, "malformed_message", before)
    assert response.json()["error"]["path"] == "$"


def test_rotated_secrets_either_signature_passes(settings, ticket):
    old, new = new_secret(), "a-raw-secret-used-as-its-utf8-bytes"
    settings.EVENT_SEAM_SECRET = f"{old} {new}"
    for n, secret in enumerate((old, new)):
        response = Host(secret).post(
            order_message(ref=f"SO{n}", lines=[ticket_line(ticket, 1, ref=f"SO{n}/1")])
        )
        assert response.status_code == 200, response.content
    assert Registration.objects.filter(ticket=ticket).count() == 2
    # a header carrying both signatures (the host mid-rotation) passes too
    document = order_message(ref="SO9", lines=[ticket_line(ticket, 1, ref="SO9/1")])
    body = json.dumps(document).encode()
    at = datetime.now(tz=UTC)
    first = signed_headers(body, secret=old, msg_id="msg_both", at=at)
    headers = {
        **first,
        "webhook-signature": f"v1,bm90LWEtc2ln== garbage {first['webhook-signature']}",
    }
    response = Host(new).post(None, body=body, headers=headers)
    assert response.status_code == 200, response.content


def test_a_retired_secret_no_longer_passes(settings, ticket):
    old = new_secret()
    settings.EVENT_SEAM_SECRET = new_secret()
    before = stored()
    response = Host(old).post(order_message(lines=[ticket_line(ticket, 1)]))
    assert_refused(response, 401, "invalid_signature", before)
