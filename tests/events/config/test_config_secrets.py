"""Every configured secret is checked at start-up by the rule that reads it (events.secret_knobs):
`manage.py check` fails with an Error naming the knob and the entry's position, the web server
refuses to start, and neither prints the value. The seam's runtime parses with the same rule.
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess

import pytest
from django.core.checks import run_checks

from events import secret_knobs
from tests.events.capability.test_capability_server import procfile_web
from tests.events.config.test_config import ROOT, knob_values, manage  # noqa: F401 — a fixture
from tests.seams.host import Host, new_secret

GOOD = "whsec_" + base64.b64encode(b"k" * 32).decode()
# Each one an entry the seam could never verify with; the parts a message must not print.
BAD_ENTRIES = {
    "not base64": ("whsec_!!not*base64!!", "is not valid base64 after whsec_."),
    "one digit too many": ("whsec_" + "QUJD" * 8 + "Q", "is not valid base64 after whsec_."),
    "url-safe base64": ("whsec_ab-cd_efgh", "is not valid base64 after whsec_."),
    "nothing after the prefix": ("whsec_", "is empty after whsec_."),
    "only padding": ("whsec_==", "is empty after whsec_."),
    "not UTF-8": ("raw-\udcff-secret", "is not UTF-8 text."),
}


SECRET_CHECKS = ("events.E001", "events.E002", "events.E003", "events.E004")


def check_secrets():
    """The secret errors of Django's checks, as `manage.py check` runs them."""
    return [error for error in run_checks() if error.id in SECRET_CHECKS]


def _printed(entry: str, text: str) -> bool:
    """Whether the secret part of an entry (after the prefix, padding aside) is in `text`."""
    secret = entry.removeprefix("whsec_").strip("=")
    return bool(secret) and secret in text


@pytest.mark.parametrize("name", BAD_ENTRIES)
def test_a_bad_seam_entry_is_named_by_its_position_and_never_printed(name):
    entry, reason = BAD_ENTRIES[name]

    with pytest.raises(secret_knobs.SecretProblem) as refused:
        secret_knobs.seam_keys(f"{GOOD} {entry} raw-third-secret")

    message = str(refused.value)
    assert message == f"EVENT_SEAM_SECRET entry 2 of 3 {reason}"
    assert refused.value.check_id == "events.E003"
    assert not _printed(entry, message)
    assert GOOD.removeprefix("whsec_") not in message and "raw-third-secret" not in message


def test_the_seam_keys_are_the_decoded_whsec_bytes_or_the_raw_utf8_bytes():
    unpadded = "whsec_" + base64.b64encode(b"ab").decode().rstrip("=")
    assert secret_knobs.seam_keys(f" {GOOD}  {unpadded}\tr\u00e9sum\u00e9 ") == (
        b"k" * 32,
        b"ab",
        "r\u00e9sum\u00e9".encode(),
    )
    with pytest.raises(secret_knobs.SecretProblem) as empty:
        secret_knobs.seam_keys(" \t ")
    assert (empty.value.check_id, str(empty.value)) == (
        "events.E002",
        "EVENT_SEAM_SECRET is empty: the sale seam would refuse every message.",
    )


@pytest.mark.parametrize("name", BAD_ENTRIES)
@pytest.mark.django_db
def test_the_check_and_the_seam_refuse_the_same_entries(name, settings):
    """One rule: what the check refuses, the seam cannot verify with (503), and the reverse."""
    entry, _ = BAD_ENTRIES[name]
    settings.EVENT_SEAM_SECRET = f"{GOOD} {entry}"

    (error,) = [e for e in check_secrets() if e.id in ("events.E002", "events.E003")]
    response = Host(GOOD).post({"type": "partner.updated", "data": {}})

    assert (error.id, error.msg.split(" is ")[0]) == (
        "events.E003",
        "EVENT_SEAM_SECRET entry 2 of 2",
    )
    assert (response.status_code, response.json()["error"]["code"]) == (503, "secret_missing")
    assert not _printed(entry, response.content.decode("utf-8", "replace"))


@pytest.mark.django_db
def test_a_seam_secret_the_check_accepts_verifies_a_message(settings):
    raw = "raw-" + secrets.token_urlsafe(16)
    settings.EVENT_SEAM_SECRET = f"{new_secret()} {raw}"
    assert check_secrets() == []

    response = Host(raw).post({"type": "partner.updated", "data": {"partner": {}}})

    # Past the signature: the schema's refusal, not the secret's or the signature's.
    assert (response.status_code, response.json()["error"]["code"]) == (400, "malformed_message")


def test_manage_check_fails_naming_the_seam_entry_without_printing_it(knob_values):  # noqa: F811
    bad = "whsec_" + secrets.token_hex(8) + "!"
    value = f"{new_secret()} {bad} {secrets.token_urlsafe(40)}"

    result = manage("check", values={**knob_values, "EVENT_SEAM_SECRET": value})

    assert result.returncode != 0
    assert (
        "(events.E003) EVENT_SEAM_SECRET entry 2 of 3 is not valid base64 after whsec_."
        in result.stderr
    )
    for part in value.split():
        assert not _printed(part, result.stdout + result.stderr)


@pytest.mark.slow
def test_the_web_server_refuses_to_start_naming_the_seam_entry(free_port):
    bad = "whsec_" + secrets.token_hex(8) + "!"
    value = f"{new_secret()} {new_secret()} {bad}"

    result = subprocess.run(
        procfile_web(free_port),
        cwd=ROOT,
        env={**os.environ, "EVENT_SEAM_SECRET": value},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode != 0
    assert "EVENT_SEAM_SECRET entry 3 of 3 is not valid base64 after whsec_." in result.stderr
    for part in value.split():
        assert not _printed(part, result.stdout + result.stderr)


@pytest.mark.parametrize(
    ("token", "adapter", "refused"),
    [
        ("Bearer abc", "sms.adapters.GatewaySmsQueue", True),  # a space: two header words
        ("abc\r\nX-Injected: 1", "sms.adapters.GatewaySmsQueue", True),
        ("t\u00f6ken", "sms.adapters.GatewaySmsQueue", True),  # not ASCII: no header at all
        ("", "sms.adapters.GatewaySmsQueue", True),  # the gateway would refuse every SMS
        ("", "events.ports.RefusingSmsQueue", False),  # no gateway wired: no token needed
        # a fresh token per run, under a fixed id: every xdist worker collects the same test
        pytest.param(
            secrets.token_urlsafe(48), "sms.adapters.GatewaySmsQueue", False, id="fresh-token"
        ),
        ("abc.DEF~1+2/3==", "sms.adapters.GatewaySmsQueue", False),
    ],
)
def test_the_sms_gateway_token_must_fit_a_bearer_header(token, adapter, refused, settings):
    settings.EVENT_SMS_GATEWAY_TOKEN = token
    settings.EVENT_SMS_QUEUE = adapter

    errors = [e for e in check_secrets() if e.id == "events.E004"]

    assert bool(errors) is refused
    for error in errors:
        assert error.msg.startswith("EVENT_SMS_GATEWAY_TOKEN ")
        assert not token or token not in error.msg


def test_manage_check_fails_on_a_bad_gateway_token_without_printing_it(knob_values):  # noqa: F811
    token = secrets.token_urlsafe(24) + " " + secrets.token_urlsafe(24)

    result = manage("check", values={**knob_values, "EVENT_SMS_GATEWAY_TOKEN": token})

    assert result.returncode != 0
    assert "(events.E004) EVENT_SMS_GATEWAY_TOKEN holds a character" in result.stderr
    for part in token.split():
        assert part not in result.stdout + result.stderr


def test_a_capability_secret_no_signer_can_encode_fails_the_check(settings):
    settings.EVENT_CAPABILITY_SECRET = "s" * 40 + "\udcff"  # an undecodable byte of the env

    (error,) = [e for e in check_secrets() if e.id == "events.E001"]

    assert error.msg == "EVENT_CAPABILITY_SECRET is not UTF-8 text."


def test_every_problem_is_reported_at_once(settings):
    settings.EVENT_CAPABILITY_SECRET = "short"
    settings.EVENT_SEAM_SECRET = "whsec_%%"
    settings.EVENT_SMS_QUEUE = "sms.adapters.GatewaySmsQueue"
    settings.EVENT_SMS_GATEWAY_TOKEN = "a b"

    assert sorted(e.id for e in check_secrets()) == [
        "events.E001",
        "events.E003",
        "events.E004",
    ]


def test_the_demo_secrets_pass(knob_values):  # noqa: F811
    """What `make run` writes (scripts/write_env.py) passes every rule."""
    assert secret_knobs.capability_secret(knob_values["EVENT_CAPABILITY_SECRET"])
    assert secret_knobs.seam_keys(knob_values["EVENT_SEAM_SECRET"])
    assert secret_knobs.gateway_token(knob_values["EVENT_SMS_GATEWAY_TOKEN"], required=True)
