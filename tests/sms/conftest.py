"""Fixtures of the sms tests."""

import pytest

from tests.sms.gateway import wire


@pytest.fixture
def gateway(settings, httpserver):
    """The ports wired (sms: the gateway outbox) to the test's local HTTP gateway."""
    return wire(settings, httpserver)
