"""A redis-server owned by one test (test infrastructure): the cache and the Celery broker of the
test point at it, so other tests' `cache.clear()` cannot interfere and a test may stop it
("Redis down") or pause it with SIGSTOP ("Redis hung")."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from kombu import pools

from config.celery import app as celery_app
from tests import parallel


def _free_port() -> int:
    return parallel.free_port()  # this xdist worker's own band (tests/parallel.py)


class RedisServer:
    """A redis-server owned by one test: start, stop (down), pause/resume (hung)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)  # waiting for a process to boot, not for a race
        client.close()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused server cannot exit
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


def _point_celery_at(url: str | None) -> None:
    """Repoint the Celery app's publisher (None: back to the configured broker) and drop every
    pooled connection (the app's and kombu's global pools, keyed by connection). Celery's
    `broker_url` prefers the CELERY_BROKER_URL environment variable (read from .env), so the
    write and read URLs, which win over it, are what is set."""
    celery_app.conf.broker_write_url = url
    celery_app.conf.broker_read_url = url
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    pools.reset()


@pytest.fixture
def own_redis():
    server = RedisServer().start()
    caches = {
        "default": {**settings.CACHES["default"], "LOCATION": f"{server.url}/1"},
    }
    broker = f"{server.url}/0"
    with override_settings(CACHES=caches, CELERY_BROKER_URL=broker):
        _point_celery_at(broker)
        try:
            yield server
        finally:
            server.stop()
            _point_celery_at(None)
