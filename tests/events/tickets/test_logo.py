"""The organiser's logo: re-encoded to a small PNG without the upload's metadata, set and
removed under the Event lock with one audit row, refused (nothing written) when it is not an
image; the event form's upload goes through the verb."""

from __future__ import annotations

from io import BytesIO
from types import SimpleNamespace

import pytest
from django.contrib.admin.sites import site
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from events.errors import ValidationFailed
from events.models import Event, EventAuditLog, EventLogo
from events.services import logos
from tests.events import factories

pytestmark = pytest.mark.django_db


def _jpeg_with_exif(size=(2400, 1200)) -> bytes:
    image = Image.new("RGB", size, (10, 120, 200))
    exif = Image.Exif()
    exif[0x010F] = "Camera Maker"  # Make
    exif[0x0131] = "Photo Editor 9"  # Software
    out = BytesIO()
    image.save(out, format="JPEG", exif=exif)
    return out.getvalue()


def test_a_logo_is_stored_as_a_small_png_without_the_uploads_metadata(actor):
    event = factories.EventFactory()
    upload = _jpeg_with_exif()
    assert b"Camera Maker" in upload

    logo = logos.set_logo(event=event, content=upload, actor=actor)

    stored = bytes(EventLogo.objects.get(event=event).content)
    assert stored.startswith(b"\x89PNG") and b"Camera Maker" not in stored
    with Image.open(BytesIO(stored)) as image:
        assert image.size == (800, 400) == (logo.width, logo.height)
        assert not image.getexif()
    (row,) = EventAuditLog.objects.filter(event=event, verb="event.logo_set")
    assert row.data["width"] == 800 and row.data["bytes"] == len(stored)


def test_the_same_logo_again_writes_nothing_and_removing_it_is_audited(actor):
    event = factories.EventFactory()
    upload = _jpeg_with_exif((300, 100))
    logos.set_logo(event=event, content=upload, actor=actor)

    logos.set_logo(event=event, content=upload, actor=actor)
    assert EventAuditLog.objects.filter(event=event, verb="event.logo_set").count() == 1

    logos.set_logo(event=event, content=None, actor=actor)
    logos.set_logo(event=event, content=None, actor=actor)
    assert not EventLogo.objects.filter(event=event).exists()
    assert EventAuditLog.objects.filter(event=event, verb="event.logo_removed").count() == 1


@pytest.mark.parametrize(
    "content",
    [b"<svg xmlns='http://www.w3.org/2000/svg'/>", b"%PDF-1.4 nope", b"\x89PNG\r\n\x1a\nbroken"],
)
def test_what_is_not_an_image_is_refused_and_nothing_written(actor, content):
    event = factories.EventFactory()

    with pytest.raises(ValidationFailed) as refused:
        logos.set_logo(event=event, content=content, actor=actor)

    assert (refused.value.code, refused.value.details["field"]) == ("invalid_value", "logo")
    assert not EventLogo.objects.exists()
    assert not EventAuditLog.objects.filter(verb__startswith="event.logo").exists()


def test_the_event_form_sets_and_removes_the_logo_through_the_verb(rf, admin_user):
    modeladmin = site._registry[Event]
    event = factories.EventFactory()
    request = rf.post("/")
    request.user = admin_user
    png = BytesIO()
    Image.new("RGB", (200, 80), (200, 20, 20)).save(png, format="PNG")

    uploaded = SimpleNamespace(
        cleaned_data={"logo_upload": SimpleUploadedFile("logo.png", png.getvalue())},
        changed_data=["logo_upload"],
    )
    modeladmin.save_model(request, event, uploaded, change=True)
    assert EventLogo.objects.get(event=event).width == 200

    removed = SimpleNamespace(cleaned_data={"logo_remove": True}, changed_data=["logo_remove"])
    modeladmin.save_model(request, event, removed, change=True)
    assert not EventLogo.objects.filter(event=event).exists()
    verbs = EventAuditLog.objects.filter(event=event).order_by("pk").values_list("verb", flat=True)
    assert list(verbs) == ["event.logo_set", "event.logo_removed"]
