"""The admin under the Content-Security-Policy, in a real browser (no inline script may run,
so the admin's own widgets must work without one): log in,
use a script-driven widget (the date/time shortcuts of the Event add page) and see no CSP
violation reported by the browser. Screenshots go to test-output/screenshots/admin-csp-*.png.
"""

from __future__ import annotations

import pytest

from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.events import factories

pytestmark = pytest.mark.slow
PASSWORD = "csp-admin-pw-for-tests"  # noqa: S105

COLLECT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


@pytest.fixture
def admin_user(transactional_db, monkeypatch):
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    return factories.UserFactory(username="csp-admin", password=PASSWORD, is_superuser=True)


@pytest.mark.django_db(transaction=True)
def test_the_admin_works_under_the_policy(admin_user, live_server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.add_init_script(COLLECT_VIOLATIONS)
    console = []
    page.on("console", lambda message: console.append(message.text))

    response = page.goto(f"{live_server.url}/admin/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.fill("#id_username", "csp-admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    assert page.evaluate("window.__cspViolations") == []

    page.goto(f"{live_server.url}/admin/events/event/add/")
    # DateTimeShortcuts.js adds the "Now" links: they exist only if the admin's scripts ran.
    now = page.get_by_role("link", name="Now").first
    now.wait_for(timeout=10_000)
    now.click()
    assert page.locator("input[name$='_1']").first.input_value() != ""
    page.screenshot(path=SHOTS / "admin-csp-event-add.png", full_page=True)

    page.goto(f"{live_server.url}/admin/events/registration/")
    assert page.evaluate("window.__cspViolations") == []
    assert not [text for text in console if "Content Security Policy" in text], console
