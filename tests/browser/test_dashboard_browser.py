"""The event dashboard in a real browser (Debian's chromium driven by Playwright).

Log in to the admin as an Event user, find the demo event in the list, open its dashboard, see
the charts (inline SVG, no script, no Content-Security-Policy violation), export the attendees
as CSV and XLSX (real downloads, opened with csv and openpyxl). The same page with JavaScript
disabled still shows every chart. Screenshots go to test-output/screenshots/dashboard-*.png.
"""

from __future__ import annotations

import csv
import io
from io import StringIO

import openpyxl
import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from events.models import Event, Registration
from tests.browser.test_admin_csp_browser import COLLECT_VIOLATIONS
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.events import factories

pytestmark = pytest.mark.slow
PASSWORD = "organiser-pw-for-tests"  # noqa: S105


@pytest.fixture
def demo(transactional_db, monkeypatch):
    from django.core.cache import cache
    from django.db import connections

    cache.clear()
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    call_command("seed_demo", stdout=StringIO())
    user = factories.UserFactory(username="organiser", password=PASSWORD)
    user.groups.add(Group.objects.get(name="Event user"))
    return Event.objects.get(name="Open Source Summit")


def log_in(page, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill("organiser")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/admin/")


@pytest.mark.django_db(transaction=True)
def test_an_event_user_opens_the_dashboard_and_exports(demo, live_server, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.add_init_script(COLLECT_VIOLATIONS)
    log_in(page, live_server.url)
    page.screenshot(path=SHOTS / "dashboard-1-admin-index.png", full_page=True)
    # the index is grouped by task
    captions = page.locator("#content-main caption").all_inner_texts()
    assert [c.strip().lower() for c in captions][:2] == ["events", "attendees"]

    page.goto(f"{live_server.url}/admin/events/event/")
    page.locator("tr", has_text="Open Source Summit").get_by_role("link", name="Dashboard").click()
    page.wait_for_url(f"**/admin/events/event/{demo.pk}/dashboard/")
    assert page.locator("h1").inner_text() == "Dashboard: Open Source Summit"
    charts = page.locator("figure[data-chart] svg")
    assert charts.count() >= 3
    for i in range(charts.count()):
        box = charts.nth(i).bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 80
    assert page.locator("#content-main script").count() == 0
    holding = Registration.objects.filter(
        event=demo, active=True, state__in=("open", "done")
    ).count()
    assert page.locator('[data-figure="seats-taken"]').inner_text() == str(holding)
    page.screenshot(path=SHOTS / "dashboard-2-event.png", full_page=True)
    assert page.evaluate("window.__cspViolations") == []

    with page.expect_download() as download_info:
        page.locator("#export-csv").click()
    assert download_info.value.suggested_filename.endswith(".csv")
    text = open(download_info.value.path(), encoding="utf-8").read()  # noqa: PTH123
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == Registration.objects.filter(event=demo).count()
    assert {r["Name"] for r in rows} >= {"Ada Lovelace", "Grace Hopper"}

    with page.expect_download() as download_info:
        page.locator("#export-xlsx").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".xlsx")
    with open(download.path(), "rb") as f:  # noqa: PTH123
        sheet = openpyxl.load_workbook(io.BytesIO(f.read())).active
    assert sheet.max_row == 1 + len(rows)
    context.close()


@pytest.mark.django_db(transaction=True)
def test_the_dashboard_reads_without_javascript(demo, live_server, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = context.new_page()
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/admin/events/event/{demo.pk}/dashboard/")
    assert page.locator("figure[data-chart] svg").count() >= 3
    assert page.get_by_text("attended of").is_visible()
    page.screenshot(path=SHOTS / "dashboard-3-mobile-no-js.png", full_page=True)
    context.close()


@pytest.mark.django_db(transaction=True)
def test_a_large_xlsx_is_prepared_in_the_background(demo, live_server, browser, monkeypatch):  # noqa: F811
    from events.read import exports

    monkeypatch.setattr(exports, "BACKGROUND_ROWS", 10)  # the demo event is "large" here
    monkeypatch.setattr(exports, "CHUNK", 5)
    context = browser.new_context(viewport={"width": 1200, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.add_init_script(COLLECT_VIOLATIONS)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/admin/events/event/{demo.pk}/dashboard/")
    page.locator("#export-xlsx").click()
    page.get_by_role("button", name="Prepare the XLSX file").click()
    page.wait_for_url("**/admin/events/event/exports/*/")
    assert page.locator("#content-main").get_attribute("data-export-state") == "queued"
    assert page.locator("#export-progress").is_visible()
    page.screenshot(path=SHOTS / "dashboard-4-export-queued.png", full_page=True)

    report = exports.build_exports()  # what the worker does
    assert report.built == 1
    # the page reloads itself (meta refresh, no script) and offers the file
    page.locator("#export-download").wait_for(timeout=10_000)
    total = Registration.objects.filter(event=demo).count()
    assert page.locator("#export-rows").inner_text() == f"{total} of {total}"
    page.screenshot(path=SHOTS / "dashboard-5-export-ready.png", full_page=True)
    with page.expect_download() as download_info:
        page.locator("#export-download").click()
    with open(download_info.value.path(), "rb") as f:  # noqa: PTH123
        sheet = openpyxl.load_workbook(io.BytesIO(f.read())).active
    assert sheet.max_row == 1 + total
    assert page.evaluate("window.__cspViolations") == []
    context.close()
