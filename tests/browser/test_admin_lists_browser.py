"""The audit trail and the seam inbox lists in a real browser: their fixed date, verb and type
filters show and filter. Screenshots go to test-output/screenshots/admin-list-*.png."""

from __future__ import annotations

import pytest

from tests.browser.test_admin_csp_browser import PASSWORD, admin_user  # noqa: F401 - fixture
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.events import factories
from tests.seams.factories import SeamInboxFactory

pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_the_growing_lists_filter_by_date_and_type(admin_user, live_server, browser):  # noqa: F811
    factories.EventAuditLogFactory.create_batch(3)
    factories.EventAuditLogFactory(verb="registration.created")
    SeamInboxFactory.create_batch(2, type="order.paid")
    SeamInboxFactory(type="order.cancelled")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", admin_user.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")

    page.goto(f"{live_server.url}/admin/events/eventauditlog/")
    page.get_by_role("link", name="Past 7 days").first.click()
    page.wait_for_url("**at__gte=**")
    assert page.locator("#result_list tbody tr").count() == 4
    page.get_by_role("link", name="registration.created").click()  # the verb filter
    page.wait_for_url("**verb=registration.created**")
    assert page.locator("#result_list tbody tr").count() == 1
    page.screenshot(path=SHOTS / "admin-list-audit.png", full_page=True)

    page.goto(f"{live_server.url}/admin/seams/seaminbox/")
    page.get_by_role("link", name="order.paid").click()
    page.wait_for_url("**type=order.paid**")
    assert page.locator("#result_list tbody tr").count() == 2
    page.screenshot(path=SHOTS / "admin-list-inbox.png", full_page=True)
