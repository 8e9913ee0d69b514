"""Capability tokens never accept Django's SECRET_KEY_FALLBACKS: those keys
rotate the session/CSRF secret, they are not capability secrets."""

from __future__ import annotations

import pytest
from django.core import signing
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

from events.errors import CapabilityRefused
from events.services import capability
from tests.events import factories

FALLBACK = "an-old-django-secret-key-kept-only-for-sessions-" + "x" * 16


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def _forged(registration, key: str) -> str:
    """A token in the exact format mint() writes, signed with `key`."""
    return signing.Signer(key=key, salt="events.capability.tickets").sign_object(
        {"f": capability.FORMAT, "s": registration.pk, "v": registration.token_version}
    )


@pytest.mark.django_db
def test_a_token_signed_with_a_django_fallback_key_is_refused(client, settings):
    registration = factories.RegistrationFactory(state="open")
    # Control: the same payload signed with the capability secret opens (the format is right).
    genuine = _forged(registration, settings.EVENT_CAPABILITY_SECRET)
    assert capability.read(purpose="tickets", token=genuine).subject == registration.pk

    with override_settings(SECRET_KEY_FALLBACKS=[FALLBACK]):
        token = _forged(registration, FALLBACK)
        # Django's own Signer (no explicit fallback list) would take it: the refusal below is
        # the capability module's doing, not the token's shape.
        assert signing.Signer(key="unrelated", salt="events.capability.tickets").unsign_object(
            token
        )
        with pytest.raises(CapabilityRefused) as refused:
            capability.read(purpose="tickets", token=token)
        assert refused.value.details["reason"] == "bad_signature"
        response = client.get(reverse("my-tickets", kwargs={"token": token}))
    assert response.status_code == 404
    assert registration.barcode not in response.content.decode()
