"""GET /healthz (interfaces.md): 200 {"db": "ok", "broker": "ok"}, 503 naming what failed."""

from __future__ import annotations

import logging

import pytest
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test import override_settings

from events import health
from tests import parallel


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound then released, never listened on)."""
    return parallel.free_port()  # this xdist worker's own band (tests/parallel.py)


@pytest.mark.django_db
def test_both_services_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"db": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_broker_unreachable_answers_503_naming_the_broker(client, caplog):
    with override_settings(CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port()}/0"):
        with caplog.at_level(logging.ERROR, logger="events.health"):
            response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"db": "ok", "broker": "error: ConnectionError"}
    logged = [r.getMessage() for r in caplog.records if r.name == "events.health"]
    assert len(logged) == 1
    assert logged[0].startswith("healthz: broker unreachable: ")


@pytest.mark.django_db
def test_database_unreachable_answers_503_naming_the_database(client, monkeypatch):
    from django.db import connection

    down = DatabaseWrapper({**connection.settings_dict, "PORT": str(closed_port())}, "down")
    monkeypatch.setattr(health, "connection", down)
    try:
        response = client.get("/healthz")
    finally:
        down.close()
    assert response.status_code == 503
    assert response.json() == {"db": "error: OperationalError", "broker": "ok"}


def test_healthz_is_get_only(client):
    assert client.post("/healthz").status_code == 405
