"""The PDF ticket and the badge sheet as people get them, in Debian's chromium (Playwright).

An attendee opens the tickets page of an order (two registrations, names in Arabic and
Japanese), sees "Download the ticket (PDF)" on each and downloads one: the file is the PDF of
that registration (its name, and a QR code decoding to its barcode). Staff print a badge sheet
from the event's badge page. Screenshots of the pages, and the PDFs' first pages rasterised,
go to test-output/screenshots/.
"""

from __future__ import annotations

from datetime import timedelta
from io import BytesIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from PIL import Image

from events.services import audit, capability, logos
from tests.browser import test_attendee_browser
from tests.events import factories
from tests.events.tickets import pdfs

pytestmark = pytest.mark.slow
SHOTS = test_attendee_browser.SHOTS
browser = test_attendee_browser.browser  # the fixture: Debian's chromium through Playwright


def _logo() -> bytes:
    out = BytesIO()
    image = Image.new("RGB", (360, 120), (18, 70, 140))
    image.paste((255, 196, 0), (24, 30, 84, 90))
    image.paste((255, 255, 255), (120, 40, 330, 56))
    image.paste((255, 255, 255), (120, 68, 290, 84))
    image.save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def event(transactional_db, monkeypatch):
    from django.core.cache import cache
    from django.db import connections

    cache.clear()
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    begin = timezone.now().replace(microsecond=0, second=0, minute=0) + timedelta(days=20)
    event = factories.EventFactory(
        name="Open Source Summit",
        date_begin=begin,
        date_end=begin + timedelta(hours=9),
        venue="Square – Brussels Meeting Centre",
        address="Mont des Arts, 1000 Brussels",
        organizer="Open Source Foundation Europe",
        ticket_instructions="Show the QR code at the entrance. Doors open at 8:30.",
    )
    logos.set_logo(event=event, content=_logo(), actor=audit.SYSTEM)
    return event


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("mobile", (390, 844)), ("desktop", (1280, 900))])
def test_download_the_pdf_ticket_from_the_tickets_page(
    event, live_server, browser, device, viewport
):
    ticket = factories.TicketFactory(event=event, name="Community pass")
    regs = [
        factories.RegistrationFactory(
            event=event,
            ticket=ticket,
            name=name,
            company_name=company,
            email=f"guest{i}@example.org",
            sale_order_ref="SO-4242",
        )
        for i, (name, company) in enumerate(
            [(pdfs.NAMES["arabic"], "Analytical Engines"), (pdfs.NAMES["japanese"], "NASA")]
        )
    ]
    token = capability.mint(purpose="order", subject="SO-4242")
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.goto(f"{live_server.url}/my-tickets/{token}/")

    links = page.get_by_role("link", name="Download the ticket (PDF)")
    assert links.count() == 2
    page.screenshot(path=SHOTS / f"{device}-ticket-pdf-1-my-tickets.png", full_page=True)
    with page.expect_download() as caught:
        links.nth(1).click()
    download = caught.value
    assert download.suggested_filename == f"ticket-open-source-summit-{regs[1].pk}.pdf"
    content = Path(download.path()).read_bytes()

    assert content.startswith(b"%PDF")
    assert pdfs.NAMES["japanese"] in pdfs.text(content)
    assert pdfs.qr_codes(content) == [regs[1].barcode]
    pdfs.image(content, scale=1.5).save(SHOTS / f"{device}-ticket-pdf-2-ticket.png")
    page.close()


@pytest.mark.django_db(transaction=True)
def test_print_a_badge_sheet_from_the_event(event, live_server, browser):
    ticket = factories.TicketFactory(event=event, name="Community pass")
    names = [*pdfs.NAMES.values(), "Maximiliane von Hohenzollern-Sigmaringen", "Jo Li"]
    for i, name in enumerate(names):
        factories.RegistrationFactory(
            event=event,
            ticket=ticket,
            name=name,
            company_name="ACME Ωmega" if i % 2 else "",
            email=f"b{i}@example.org",
        )
    user = factories.UserFactory(username="event-user")
    user.set_password("pw-for-tests-only")
    user.save()
    user.groups.add(Group.objects.get(name="Event user"))
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/")
    page.get_by_label("Username").fill("event-user")
    page.get_by_label("Password").fill("pw-for-tests-only")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/admin/events/event/{event.pk}/dashboard/")
    page.get_by_role("link", name="Name badges (PDF)").click()
    page.wait_for_url("**/badges/")
    page.get_by_label("Labels").select_option("L7165")
    page.screenshot(path=SHOTS / "badges-1-form.png", full_page=True)

    # Chromium shows a PDF in its viewer, which headless mode does not draw: the same GET as
    # the form's, made with the page's session.
    query = "layout=L7165&states=open_done&ticket="
    answer = page.request.get(f"{live_server.url}/admin/events/event/{event.pk}/badges/?{query}")

    assert answer.status == 200 and answer.headers["content-type"] == "application/pdf"
    content = answer.body()
    assert pdfs.pages(content) == 2  # 9 badges, 8 per sheet
    text = pdfs.text(content)
    assert all(name in text for name in names)
    pdfs.image(content, scale=1.5).save(SHOTS / "badges-2-sheet-L7165.png")
    assert len(pdfs.qr_codes(content)) == 8
    context.close()
