"""Redis down and Redis hung (a fault must cost a fast answer, never a blocked worker): a
test-owned redis-server, stopped or paused
with SIGSTOP, serves as the cache, the rate limiter's store and the Celery broker.

- the intake API answers 503 JSON `service_unavailable` with Retry-After within 2 s;
- the event page, the admin and /healthz (503 naming the broker) keep answering;
- an admin "add registration" answers its success redirect once committed (the after-commit
  nudge is skipped and logged, never a 500 that invites a duplicate);
- once Redis is back, the next beat pass sends the confirmation that was missed.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from config.celery import app as celery_app
from events.models import MailOutbox, Registration
from events.services import scheduler
from tests.events import factories

FAULT_DEADLINE = 2.0  # seconds: the brief's "within 2 s"

# Every test here times an answer against FAULT_DEADLINE: run alone (scripts/test.sh), not
# beside a parallel worker that competes for the cores.
pytestmark = pytest.mark.serial


@pytest.fixture(params=["down", "hung"])
def redis_fault(request, own_redis):
    """Apply the fault; yields a function that ends it (Redis answers again)."""
    if request.param == "down":
        own_redis.stop()

        def heal():
            own_redis.start()

    else:
        own_redis.pause()

        def heal():
            own_redis.resume()

    yield heal
    # the fixture own_redis stops the server in every state


@pytest.fixture
def staff_client(client):
    client.force_login(factories.UserFactory(username="ops", is_superuser=True))
    return client


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


@pytest.mark.django_db
def test_the_intake_answers_503_json_quickly(client, redis_fault):
    event = factories.EventFactory()
    response, elapsed = timed(
        lambda: client.post(
            reverse("api-intake", kwargs={"event_id": event.pk}),
            data=json.dumps({"attendees": [{"name": "Ann"}]}),
            content_type="application/json",
        )
    )
    assert elapsed < FAULT_DEADLINE
    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "service_unavailable"
    assert int(response["Retry-After"]) > 0
    assert not Registration.objects.exists()


@pytest.mark.django_db
def test_other_pages_keep_answering(client, staff_client, redis_fault):
    event = factories.EventFactory(is_published=True)
    for path, expected in [
        (reverse("event-detail", kwargs={"event_id": event.pk}), 200),
        ("/admin/", 200),
        ("/admin/events/registration/", 200),
        ("/admin/login/", 302),  # logged in: the login page sends staff on to the admin
    ]:
        response, elapsed = timed(lambda path=path: staff_client.get(path))
        assert (path, response.status_code) == (path, expected)
        assert elapsed < FAULT_DEADLINE, path

    response, elapsed = timed(lambda: client.get("/healthz"))
    assert elapsed < FAULT_DEADLINE
    assert response.status_code == 503
    assert response.json()["db"] == "ok"
    assert response.json()["broker"].startswith("error: ")


@pytest.mark.django_db(transaction=True)
def test_admin_add_succeeds_once_committed_and_beat_sends_the_missed_mail(
    staff_client, redis_fault, actor, caplog
):
    factories.MessageTemplateFactory(
        ref="registration-confirmation",
        subject="You're registered: {{ event.name }}",
        body="<p>Hello {{ registration.name }}</p>",
    )
    begin = timezone.now() + timedelta(days=10)
    event = factories.EventFactory(
        name="Outage Summit", date_begin=begin, date_end=begin + timedelta(hours=8)
    )
    scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="registration-confirmation",
        actor=actor,
    )

    response, elapsed = timed(
        lambda: staff_client.post(
            "/admin/events/registration/add/",
            {"event": event.pk, "name": "Walk-in", "email": "walk@example.org", "state": "open"},
        )
    )
    assert response.status_code == 302  # the success redirect, not a 500 after the save
    assert elapsed < 2 * FAULT_DEADLINE  # at most the nudges' two short timeouts
    assert Registration.objects.filter(event=event, name="Walk-in").count() == 1
    assert "not sent (beat will run it)" in caplog.text
    assert not mail.outbox and not MailOutbox.objects.exists()

    redis_fault()  # Redis answers again: beat's next minute runs the passes
    import events.tasks  # noqa: F401 — registers the beat tasks, as the worker's autodiscovery does

    celery_app.tasks["events.run_pass"].apply()
    celery_app.tasks["events.deliver_outbox"].apply()

    assert [m.subject for m in mail.outbox] == ["You're registered: Outage Summit"]
    assert mail.outbox[0].to == ["walk@example.org"]


def test_a_publish_to_a_faulty_broker_fails_fast(redis_fault):
    """The broker's own timeouts and short publish retry: a nudge's publish gives up in a few
    seconds (beat catches up), it never holds a web worker for the default ~30 s or forever."""
    from kombu.exceptions import OperationalError

    started = time.monotonic()
    with pytest.raises(OperationalError):
        celery_app.send_task("events.run_pass")
    assert time.monotonic() - started < 3 * FAULT_DEADLINE
