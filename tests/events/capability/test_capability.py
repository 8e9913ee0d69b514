"""Capability tokens (spec.md §7.1, §7.3): purposes, versions, fail-closed secret, the command,
and the server refusing to start with a bad secret."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse

from events.errors import CapabilityRefused, SecretMissing
from events.models import EventAuditLog, Registration
from events.services import capability, links, registrations
from tests.events import factories
from tests.helpers import run_concurrently

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def tickets(token: str) -> str:
    return reverse("my-tickets", kwargs={"token": token})


def ics(token: str) -> str:
    return reverse("ics", kwargs={"token": token})


def change_one_character(token: str, position: int) -> str:
    char = token[position]
    return token[:position] + ("B" if char == "A" else "A") + token[position + 1 :]


# --- mint / verify ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("purpose", ["tickets", "ics"])
def test_a_token_verifies_to_its_registration(purpose):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose=purpose, subject=reg)
    assert capability.verify(purpose=purpose, token=token) == reg.pk
    assert (
        capability.verify(purpose=purpose, token=capability.mint(purpose=purpose, subject=reg.pk))
        == reg.pk
    )


@pytest.mark.django_db
def test_an_order_token_verifies_to_its_order_ref():
    factories.RegistrationFactory(sale_order_ref="SO42")
    token = capability.mint(purpose="order", subject="SO42")
    assert capability.verify(purpose="order", token=token) == "SO42"


@pytest.mark.django_db
@pytest.mark.parametrize("secret", [None, "", "s" * 31])
def test_mint_and_verify_fail_closed_without_a_32_character_secret(secret):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="tickets", subject=reg)
    with override_settings(EVENT_CAPABILITY_SECRET=secret):
        for purpose in capability.PURPOSES:
            with pytest.raises(SecretMissing) as minted:
                capability.mint(purpose=purpose, subject=reg if purpose != "order" else "SO1")
            assert minted.value.code == "secret_missing"
            with pytest.raises(SecretMissing):
                capability.verify(purpose=purpose, token=token)


@pytest.mark.django_db
@pytest.mark.parametrize("position", [0, 5, -1, -10])
def test_one_changed_character_is_refused_on_both_routes(client, position):
    reg = factories.RegistrationFactory()
    for route, purpose in ((tickets, "tickets"), (ics, "ics")):
        good = capability.mint(purpose=purpose, subject=reg)
        assert client.get(route(good)).status_code == 200
        bad = change_one_character(good, position)
        assert bad != good
        assert client.get(route(bad)).status_code == 404
        with pytest.raises(CapabilityRefused):
            capability.verify(purpose=purpose, token=bad)


@pytest.mark.django_db
def test_a_token_of_registration_a_never_opens_b(client):
    a = factories.RegistrationFactory()
    b = factories.RegistrationFactory(event=a.event)
    token_a = capability.mint(purpose="tickets", subject=a)
    token_b = capability.mint(purpose="tickets", subject=b)
    page = client.get(tickets(token_a)).content.decode()
    assert a.barcode in page and b.barcode not in page
    # A's signature over B's payload (and the reverse) is refused.
    payload_a, sig_a = token_a.rsplit(":", 1)
    payload_b, sig_b = token_b.rsplit(":", 1)
    assert client.get(tickets(f"{payload_b}:{sig_a}")).status_code == 404
    assert client.get(tickets(f"{payload_a}:{sig_b}")).status_code == 404


@pytest.mark.django_db
def test_a_token_of_one_purpose_never_opens_another(client):
    reg = factories.RegistrationFactory(sale_order_ref="SO7")
    tickets_token = capability.mint(purpose="tickets", subject=reg)
    ics_token = capability.mint(purpose="ics", subject=reg)
    order_token = capability.mint(purpose="order", subject="SO7")
    assert client.get(ics(tickets_token)).status_code == 404
    assert client.get(ics(order_token)).status_code == 404
    assert client.get(tickets(ics_token)).status_code == 404
    assert client.get(ics(ics_token)).status_code == 200
    for purpose, token in (("order", tickets_token), ("tickets", order_token)):
        with pytest.raises(CapabilityRefused) as refused:
            capability.verify(purpose=purpose, token=token)
        assert refused.value.details["reason"] == "wrong_purpose"


@pytest.mark.django_db
def test_a_token_signed_with_another_secret_is_refused(client):
    reg = factories.RegistrationFactory()
    forged = signing.Signer(key="another-secret-" + "x" * 40, salt="events.capability.ics")
    token = forged.sign_object({"f": 1, "s": reg.pk, "v": reg.token_version})
    assert client.get(ics(token)).status_code == 404
    # The same payload signed with the real secret opens.
    assert client.get(ics(capability.mint(purpose="ics", subject=reg))).status_code == 200
    with override_settings(EVENT_CAPABILITY_SECRET="another-secret-" + "x" * 40):
        assert client.get(ics(token)).status_code == 200


@pytest.mark.django_db
def test_django_secret_key_does_not_sign_capabilities(client):
    reg = factories.RegistrationFactory()
    token = signing.Signer(key=settings.SECRET_KEY, salt="events.capability.ics").sign_object(
        {"f": 1, "s": reg.pk, "v": reg.token_version}
    )
    assert client.get(ics(token)).status_code == 404


@pytest.mark.django_db
def test_bumping_token_version_revokes_every_link_of_the_registration(client, actor):
    reg = factories.RegistrationFactory(sale_order_ref="SO9")
    other = factories.RegistrationFactory(event=reg.event)
    old = {
        "tickets": tickets(capability.mint(purpose="tickets", subject=reg)),
        "ics": ics(capability.mint(purpose="ics", subject=reg)),
        "order": tickets(capability.mint(purpose="order", subject="SO9")),
    }
    other_link = ics(capability.mint(purpose="ics", subject=other))
    assert {k: client.get(v).status_code for k, v in old.items()} == dict.fromkeys(old, 200)

    capability.revoke_links(registration=reg, actor=actor)

    assert {k: client.get(v).status_code for k, v in old.items()} == dict.fromkeys(old, 404)
    assert Registration.objects.get(pk=reg.pk).token_version == 2
    assert (
        EventAuditLog.objects.filter(registration=reg, verb="registration.links_revoked").count()
        == 1
    )
    assert client.get(other_link).status_code == 200
    # New links work.
    fresh = Registration.objects.get(pk=reg.pk)
    assert client.get(tickets(capability.mint(purpose="tickets", subject=fresh))).status_code == 200
    assert client.get(tickets(capability.mint(purpose="order", subject="SO9"))).status_code == 200


@pytest.mark.django_db
def test_revoking_any_registration_of_an_order_revokes_every_earlier_order_link(client, actor):
    # Given an order of A (v1) and B (v1): A's links revoked, then an order link minted.
    a = factories.RegistrationFactory(sale_order_ref="SO11")
    b = factories.RegistrationFactory(event=a.event, sale_order_ref="SO11")
    capability.revoke_links(registration=a, actor=actor)
    order_link = tickets(capability.mint(purpose="order", subject="SO11"))
    assert b.barcode in client.get(order_link).content.decode()

    # When B's links are revoked,
    capability.revoke_links(registration=b, actor=actor)

    # then the order link minted before no longer opens (it would keep showing B).
    response = client.get(order_link)
    assert response.status_code == 404
    assert b.barcode not in response.content.decode()
    assert capability.verify(
        purpose="order", token=capability.mint(purpose="order", subject="SO11")
    )
    with pytest.raises(CapabilityRefused) as refused:
        capability.verify(purpose="order", token=order_link.split("/")[-2])
    assert refused.value.details["reason"] == "stale_version"
    versions = dict(
        Registration.objects.filter(sale_order_ref="SO11").values_list("pk", "token_version")
    )
    assert versions == {a.pk: 2, b.pk: 3}


@pytest.mark.django_db
def test_archiving_a_revoked_registration_never_reopens_an_older_order_link(client, actor):
    a = factories.RegistrationFactory(sale_order_ref="SO12")
    factories.RegistrationFactory(event=a.event, sale_order_ref="SO12")
    order_link = tickets(capability.mint(purpose="order", subject="SO12"))
    capability.revoke_links(registration=a, actor=actor)
    assert client.get(order_link).status_code == 404

    registrations.cancel(registration=a, actor=actor)
    registrations.archive(registration=a, actor=actor)

    assert client.get(order_link).status_code == 404


@pytest.mark.django_db
def test_an_order_link_spans_events_and_revoking_in_either_event_revokes_it(client, actor):
    a = factories.RegistrationFactory(sale_order_ref="SO13")
    b = factories.RegistrationFactory(sale_order_ref="SO13")
    assert a.event_id != b.event_id
    capability.revoke_links(registration=b, actor=actor)
    order_link = tickets(capability.mint(purpose="order", subject="SO13"))
    assert client.get(order_link).status_code == 200
    capability.revoke_links(registration=a, actor=actor)
    assert client.get(order_link).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_concurrent_revocations_in_one_order_never_share_a_version(actor):
    """Two registrations of one order in two events, revoked at once (real threads released by
    one barrier per round): the second revocation waits for the first and goes above it, so an
    order link minted between the two never survives the second."""
    rounds = 5
    orders = []
    for index in range(rounds):
        ref = f"SO-RACE-{index}"
        orders.append([factories.RegistrationFactory(sale_order_ref=ref) for _ in range(2)])

    for pair in orders:
        revoked = run_concurrently(
            [lambda reg=reg: capability.revoke_links(registration=reg, actor=actor) for reg in pair]
        )
        assert [r.pk for r in revoked] == [r.pk for r in pair]

    for pair in orders:
        versions = sorted(
            Registration.objects.filter(pk__in=[r.pk for r in pair]).values_list(
                "token_version", flat=True
            )
        )
        assert versions == [2, 3]


@pytest.mark.django_db
@pytest.mark.parametrize("route", ["my-tickets", "ics"])
@pytest.mark.parametrize("secret", ["", "s" * 31])
def test_secret_missing_answers_503_on_every_token_route(client, route, secret):
    reg = factories.RegistrationFactory(sale_order_ref="SO3")
    purpose = "tickets" if route == "my-tickets" else "ics"
    tokens = [capability.mint(purpose=purpose, subject=reg), "garbage"]
    if route == "my-tickets":
        tokens.append(capability.mint(purpose="order", subject="SO3"))
    with override_settings(EVENT_CAPABILITY_SECRET=secret):
        for token in tokens:
            response = client.get(reverse(route, kwargs={"token": token}))
            assert response.status_code == 503
            assert response["Cache-Control"] == "private, no-store"
            assert response["Referrer-Policy"] == "no-referrer"


# --- links, command, start-up -------------------------------------------------------------


@pytest.mark.django_db
def test_links_are_built_on_event_public_url(client):
    reg = factories.RegistrationFactory()
    with override_settings(EVENT_PUBLIC_URL="https://tickets.example.com/"):
        url = links.tickets_url(reg)
        ics_url = links.ics_url(reg)
    assert url.startswith("https://tickets.example.com/my-tickets/")
    assert ics_url.startswith("https://tickets.example.com/ics/") and ics_url.endswith(".ics")
    assert client.get(urlsplit(url).path).status_code == 200
    assert client.get(urlsplit(ics_url).path).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("purpose", ["tickets", "order", "ics"])
def test_capability_link_command_prints_a_working_url(client, purpose):
    reg = factories.RegistrationFactory(sale_order_ref="SO5")
    out = StringIO()
    with override_settings(EVENT_PUBLIC_URL="https://tickets.example.com"):
        call_command("capability_link", str(reg.pk), "--purpose", purpose, stdout=out)
    url = out.getvalue().strip()
    assert url.startswith("https://tickets.example.com/")
    response = client.get(urlsplit(url).path)
    assert response.status_code == 200
    assert reg.barcode.encode() in response.content or b"BEGIN:VCALENDAR" in response.content


@pytest.mark.django_db
def test_capability_link_command_refuses_an_order_link_without_order():
    reg = factories.RegistrationFactory(sale_order_ref="")
    with pytest.raises(CommandError, match="no sale order"):
        call_command("capability_link", str(reg.pk), "--purpose", "order", stdout=StringIO())
    with pytest.raises(CommandError, match="No active registration"):
        call_command("capability_link", str(reg.pk + 999), "--purpose", "tickets")


def _import_wsgi(secret: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVENT_CAPABILITY_SECRET": secret}
    return subprocess.run(
        [sys.executable, "-c", "import config.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("secret", ["", "too-short-secret"])
def test_the_wsgi_application_refuses_to_start_with_a_bad_secret(secret):
    result = _import_wsgi(secret)
    assert result.returncode != 0
    assert "EVENT_CAPABILITY_SECRET is missing or shorter than 32 characters" in result.stderr


def test_the_wsgi_application_starts_with_a_good_secret():
    assert _import_wsgi("g" * 32).returncode == 0


def test_manage_py_check_reports_a_bad_secret():
    env = {**os.environ, "EVENT_CAPABILITY_SECRET": "short"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "events.E001" in result.stderr
