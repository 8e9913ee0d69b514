"""The sms tests' gateway: every port wired (sms: the HTTP gateway outbox) and the gateway URL
at the test's own pytest-httpserver, with a known token. tests/sms/conftest.py makes `wire` the
`gateway` fixture; the sms probes declare the same fixture from it."""

from __future__ import annotations

from tests.events.config.test_ports import wire_ports

TOKEN = "sms-gateway-token-4f9c1e"  # distinctive, so a leak into a log line is found
GATEWAY = "sms.adapters.GatewaySmsQueue"


def wire(settings, httpserver):
    """Every port wired (sms: the gateway outbox) and the gateway URL at the test's server."""
    wire_ports(settings)
    settings.EVENT_SMS_QUEUE = GATEWAY
    settings.EVENT_SMS_GATEWAY_URL = httpserver.url_for("/sms")
    settings.EVENT_SMS_GATEWAY_TOKEN = TOKEN
    return httpserver


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}
