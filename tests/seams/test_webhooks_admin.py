"""Outbound webhooks for staff: endpoints written through the verbs from the admin, each
endpoint's deliveries with their attempts and a "send again" action, the dashboard's alert for a
disabled endpoint, the demo endpoint and the local sink that verifies what it receives."""

from __future__ import annotations

import io
import json
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from events.models import EventAuditLog
from events.services import registrations
from seams.dashboard import seam_panel
from seams.management.commands import webhook_sink
from seams.models import WebhookDelivery, WebhookEndpoint, WebhookMessage
from seams.services import webhooks
from tests.events import factories
from tests.seams.receiver import Receiver

pytestmark = pytest.mark.django_db
ENDPOINTS = "/admin/seams/webhookendpoint/"
DELIVERIES = "/admin/seams/webhookdelivery/"


def book(event, n: int = 1):
    return registrations.register(
        event=event, attendees=[{"name": f"Guest {i}"} for i in range(n)], actor="system"
    )


def test_staff_add_an_endpoint_through_the_verb_and_see_its_secret(admin_client):
    event = factories.EventFactory()
    response = admin_client.post(
        ENDPOINTS + "add/",
        {
            "name": "Shop",
            "url": "https://shop.example.org/hooks",
            "event": event.pk,
            "event_types": ["registration.created", "event.cancelled"],
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.event_types == ["registration.created", "event.cancelled"]
    assert endpoint.secret.startswith("whsec_")
    Webhook(endpoint.secret)  # a secret the library accepts
    created = EventAuditLog.objects.get(verb="webhook_endpoint.created")
    assert created.data["endpoint"] == endpoint.pk
    page = admin_client.get(f"{ENDPOINTS}{endpoint.pk}/change/").content.decode()
    assert endpoint.secret in page
    assert "healthy" in admin_client.get(ENDPOINTS).content.decode()


def test_an_endpoint_url_that_is_not_http_is_refused_and_nothing_is_written(admin_client):
    response = admin_client.post(
        ENDPOINTS + "add/",
        {"name": "Bad", "url": "ftp://files.example.org/x", "event_types": ["event.cancelled"]},
    )
    # the verb refused it: back to the form, told why
    assert (response.status_code, response["Location"]) == (302, ENDPOINTS + "add/")
    told = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("invalid_value" in m and "field: url" in m for m in told), told
    assert not WebhookEndpoint.objects.exists()
    with pytest.raises(webhooks.ValidationFailed) as refused:
        webhooks.create_endpoint(name="x", url="ftp://x.example.org/", actor="system")
    assert refused.value.code == "invalid_value"
    with pytest.raises(webhooks.ValidationFailed):
        webhooks.create_endpoint(
            name="x", url="https://x.example.org/", event_types=["nope"], actor="system"
        )
    assert not WebhookEndpoint.objects.exists()


def test_deliveries_show_their_attempts_and_are_sent_again(admin_client):
    receiver = Receiver(status=400)
    try:
        webhooks.create_endpoint(name="Host", url=receiver.url, actor="system")
        book(factories.EventFactory())
        webhooks.deliver_due()
        delivery = WebhookDelivery.objects.get()
        listing = admin_client.get(DELIVERIES + "?state__exact=failed").content.decode()
        assert "registration.created" in listing
        detail = admin_client.get(f"{DELIVERIES}{delivery.pk}/change/").content.decode()
        assert delivery.message.msg_id in detail and "400" in detail  # the attempt's answer

        receiver.status = 200
        response = admin_client.post(
            DELIVERIES, {"action": "send_again", "_selected_action": [delivery.pk]}
        )
        assert response.status_code == 302
        delivery.refresh_from_db()
        assert delivery.state == "pending"
        webhooks.deliver_due()
        delivery.refresh_from_db()
        assert delivery.state == "delivered"
    finally:
        receiver.stop()


def test_rotate_and_enable_actions_go_through_the_verbs(admin_client):
    endpoint = webhooks.create_endpoint(name="Host", url="https://h.example.org/", actor="system")
    old = endpoint.secret
    admin_client.post(ENDPOINTS, {"action": "rotate_secrets", "_selected_action": [endpoint.pk]})
    admin_client.post(ENDPOINTS, {"action": "disable_endpoints", "_selected_action": [endpoint.pk]})
    endpoint.refresh_from_db()
    assert (endpoint.previous_secret, endpoint.enabled) == (old, False)
    assert endpoint.secret != old
    verbs = set(EventAuditLog.objects.values_list("verb", flat=True))
    assert {"webhook_endpoint.secret_rotated", "webhook_endpoint.disabled"} <= verbs


def test_the_dashboard_alerts_on_a_disabled_endpoint_in_a_fixed_number_of_queries():
    event = factories.EventFactory()
    endpoint = webhooks.create_endpoint(name="Shop", url="https://s.example.org/", actor="system")
    webhooks.create_endpoint(
        name="Other event",
        url="https://o.example.org/",
        actor="system",
        event=factories.EventFactory(),
    )
    book(event, 3)
    webhooks.set_enabled(endpoint=endpoint, enabled=False, actor="system")

    with CaptureQueriesContext(connection) as captured:
        panel = seam_panel(event)

    assert len(captured.captured_queries) == 2
    (alert,) = panel.alerts
    assert "“Shop” is disabled" in alert.text and "3 message(s) wait" in alert.text
    assert alert.url.endswith(f"/admin/seams/webhookendpoint/{endpoint.pk}/change/")
    figures = {f.label: f.value for f in panel.figures}
    assert figures["Webhook endpoints (disabled)"] == "1 (1)"
    assert figures["Webhook deliveries waiting"] == 3


def test_seed_demo_points_an_endpoint_at_the_local_sink(settings):
    settings.EVENT_WEBHOOK_SINK_URL = "http://127.0.0.1:9098/webhooks"
    for _ in range(2):
        call_command("seed_demo", stdout=io.StringIO())
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.url == settings.EVENT_WEBHOOK_SINK_URL and endpoint.event_id is None
    # the demo's host order minted registrations after it: their messages wait for the sink
    assert WebhookMessage.objects.filter(type="registration.created").count() >= 2


@pytest.mark.django_db(transaction=True)  # the sink's thread reads the endpoint committed
def test_the_sink_logs_what_verifies_and_refuses_the_rest(caplog):
    url = "http://127.0.0.1:0/webhooks"
    endpoint = webhooks.create_endpoint(name="Demo", url=url, actor="system")
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), webhook_sink.make_handler(url=url, path="/webhooks")
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    body = json.dumps(
        {"type": "event.cancelled", "timestamp": "x", "data": {"subject": "event:1", "version": 1}}
    )
    now = timezone.now()
    try:
        with caplog.at_level("INFO", logger="seams.webhook_sink"):
            for secret, expected in ((endpoint.secret, 200), (webhooks.new_secret(), 401)):
                headers = {
                    "webhook-id": "msg_sink",
                    "webhook-timestamp": str(int(now.timestamp())),
                    "webhook-signature": Webhook(secret).sign("msg_sink", now, body),
                }
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/webhooks", content=body, headers=headers
                )
                assert answer.status_code == expected
    finally:
        server.shutdown()
        server.server_close()
    assert "event.cancelled event:1 v1 msg_sink verified" in caplog.text
    assert "refused msg_sink" in caplog.text
