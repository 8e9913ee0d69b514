"""Staff add a registration in the admin: it goes through register() (seats, audit)."""

import pytest

from events.models import EventAuditLog, Registration
from tests.events import factories


@pytest.fixture
def staff_client(client):
    user = factories.UserFactory(username="boss", is_superuser=True)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_admin_add_registers_through_the_service(staff_client):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    response = staff_client.post(
        "/admin/events/registration/add/",
        {"event": event.pk, "name": "Walk-in", "email": "walk@example.org", "state": "open"},
    )
    assert response.status_code == 302
    reg = Registration.objects.get(event=event)
    assert (reg.name, reg.state, len(reg.barcode) > 0) == ("Walk-in", "open", True)
    assert EventAuditLog.objects.filter(registration=reg, verb="registration.created").count() == 1


@pytest.mark.django_db
def test_admin_add_on_a_full_event_shows_the_code_and_writes_nothing(staff_client):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    factories.RegistrationFactory(event=event)
    response = staff_client.post(
        "/admin/events/registration/add/",
        {"event": event.pk, "name": "Late", "email": "late@example.org", "state": "open"},
        follow=True,
    )
    assert response.status_code == 200
    assert any("sold_out" in str(m) for m in response.context["messages"])
    assert Registration.objects.filter(event=event).count() == 1
