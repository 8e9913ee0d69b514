"""Replayed scans with hostile fields (hypothesis): whatever a door's queue, or someone posing as
one, sends in `scanned_at`, `offline`, `offline_status`, `snapshot` and the barcode, the scan
API answers 200 with a scan answer or 400 `invalid_value`, never a 500, and a refusal writes
nothing (no audit row, no attendance, no conflict)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from datetime import timezone as dt_timezone

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desk.models import OfflineConflict
from desk.services.attendance import ScanStatus
from tests.desk.test_offline import SCAN, door, event, post, signed  # noqa: F401 - fixtures
from tests.events.intake.test_intake_properties import ANY_CHAR  # surrogates included
from tests.helpers import snapshot as written

pytestmark = pytest.mark.django_db

# What breaks parsers and encoders: NUL, lone surrogates, other scripts' digits, a Unicode
# hyphen and line separator, a BOM.
HOSTILE = st.sampled_from(
    ["\ud800", "\udfff", "\x00", "١", "𝟏", "２", "\u2010", "\u2028", "\ufeff"]
)
NASTY = st.one_of(HOSTILE, st.sampled_from(["", " ", "١٢", "２０２６", "Z"]))
STATUSES = [status.value for status in ScanStatus]


def spoiled_time(draw) -> object:
    """`scanned_at` as a door sends it (a time near now with any UTC offset, possibly outside
    the accepted window), spoiled, or anything else."""
    moment = timezone.now() + timedelta(seconds=draw(st.integers(-30 * 3600, 3600)))
    offset = dt_timezone(timedelta(minutes=draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1))))
    text = moment.astimezone(offset).isoformat()
    how = draw(st.sampled_from(["as sent", "no offset", "insert", "replace", "other", "not text"]))
    if how == "as sent":
        return text
    if how == "no offset":
        return text[:19]
    if how in ("insert", "replace"):
        return spliced(draw, text, replace=how == "replace")
    if how == "other":
        return draw(
            st.one_of(
                st.text(ANY_CHAR, max_size=70),
                st.sampled_from(
                    [
                        "0001-01-01T00:00:00+23:59",
                        "9999-12-31T23:59:59-23:59",
                        "2026-02-30T10:00:00+00:00",
                        "2026-12-04T24:00:00+00:00",
                    ]
                ),
            )
        )
    return draw(st.one_of(st.booleans(), st.integers(), st.floats(), st.just([text])))


def spoiled_signature(draw, signature: str) -> object:
    """The list's signature with a character put in or changed (anywhere: the payload, the
    timestamp, the signature proper), cut short, or anything else."""
    how = draw(st.sampled_from(["insert", "replace", "cut", "other"]))
    if how in ("insert", "replace"):
        return spliced(draw, signature, replace=how == "replace")
    if how == "cut":
        return signature[: draw(st.integers(0, len(signature) - 1))]
    return draw(st.one_of(st.text(ANY_CHAR, max_size=80), st.integers(), st.booleans()))


def spliced(draw, text: str, *, replace: bool) -> str:
    at = draw(st.integers(0, len(text) - 1))
    char = draw(st.one_of(HOSTILE, ANY_CHAR))
    return text[:at] + char + text[at + replace :]


def spoiled(draw, field: str, signature: str) -> object:
    if field == "scanned_at":
        return spoiled_time(draw)
    if field == "offline":
        return draw(st.sampled_from([False, "true", 1, 0, [], {}]))
    if field == "offline_status":
        return draw(st.one_of(st.text(ANY_CHAR, max_size=30), st.integers(), NASTY))
    if field == "snapshot":
        return spoiled_signature(draw, signature)
    return draw(st.one_of(st.text(ANY_CHAR, max_size=20), NASTY))  # the barcode


FIELDS = ["scanned_at", "offline", "offline_status", "snapshot", "barcode"]


NONCES = itertools.count()


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
@pytest.mark.parametrize("field", FIELDS)
def test_a_replayed_scan_never_answers_500_and_a_refusal_writes_nothing(door, event, field, data):  # noqa: F811
    signature = signed(door, event)["signature"]
    # A replay as a door sends it, then `field` spoiled or left out (now and then one more
    # field too): each check of the API is reached with the checks before it passed.
    body: dict[str, object] = {
        "barcode": data.draw(st.sampled_from(["5100000000000001", "5100000000000002"])),
        "event_id": event.pk,
        "scanned_at": (timezone.now() - timedelta(minutes=5)).isoformat(),
        "offline": True,
        "offline_status": data.draw(st.sampled_from(STATUSES)),
        "snapshot": signature,
        "nonce": f"replay-{next(NONCES)}",
    }
    fields = [field]
    if data.draw(st.integers(0, 3)) == 0:
        fields.append(data.draw(st.sampled_from([f for f in FIELDS if f != field])))
    for name in fields:
        if name != "barcode" and data.draw(st.integers(0, 5)) == 0:
            del body[name]
        else:
            body[name] = spoiled(data.draw, name, signature)
    before, conflicts = written(event), OfflineConflict.objects.count()

    response = post(door, SCAN, body)

    assert response.status_code in (200, 400), (response.status_code, response.content[:300])
    answer = response.json()
    if response.status_code == 400:
        assert answer["error"]["code"] == "invalid_value", answer
        assert written(event) == before
        assert OfflineConflict.objects.count() == conflicts
    else:
        assert answer["status"] in STATUSES, answer
