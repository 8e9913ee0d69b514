"""Fixtures of the seam tests: a fresh EVENT_SEAM_SECRET per test and a signing host."""

from __future__ import annotations

import pytest

from tests.events import factories as ev
from tests.seams.host import Host, new_secret


@pytest.fixture
def seam_secret(settings) -> str:
    secret = new_secret()
    settings.EVENT_SEAM_SECRET = secret
    return secret


@pytest.fixture
def host(seam_secret) -> Host:
    return Host(seam_secret)


@pytest.fixture
def ticket():
    return ev.TicketFactory(event=ev.EventFactory(seats_limited=False))
