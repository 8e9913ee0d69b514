"""The API reference page (/api/docs/) in a real browser: Swagger UI from our own static files
renders every operation of the description under the site's Content-Security-Policy, with no
violation reported and no request leaving the site. Screenshot:
test-output/screenshots/api-docs.png."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from events import openapi
from tests.browser.test_admin_csp_browser import COLLECT_VIOLATIONS
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_the_reference_renders_every_operation_under_the_policy(live_server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.add_init_script(COLLECT_VIOLATIONS)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))

    response = page.goto(f"{live_server.url}/api/docs/")
    assert response.status == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy
    page.wait_for_selector(".opblock", timeout=20_000)

    document = openapi.document()
    summaries = {
        op["summary"]
        for group in ("paths", "webhooks")  # the operations, then the messages we send
        for item in document[group].values()
        for method, op in item.items()
        if method in openapi.METHODS
    }
    blocks = page.locator(".opblock")
    assert blocks.count() == len(summaries) > len(document["webhooks"]) > 0
    shown = {
        blocks.nth(i).locator(".opblock-summary-description").inner_text()
        for i in range(blocks.count())
    }
    assert shown == summaries
    assert page.locator(".info .title").inner_text().startswith("backbone-events public API")
    page.screenshot(path=SHOTS / "api-docs.png", full_page=True)

    assert page.evaluate("window.__cspViolations") == []
    assert not [text for text in console if "Content Security Policy" in text], console
    assert hosts == {urlsplit(live_server.url).netloc}  # nothing fetched from elsewhere
    page.close()
