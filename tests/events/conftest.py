"""Fixtures of the events tests."""

from tests.events.redis_server import own_redis  # noqa: F401 — a fixture: a test's own Redis
