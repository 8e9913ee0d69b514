import pytest

from events.models import Event, RegistrationState
from events.services import registrations, seats
from tests.events import factories


@pytest.mark.django_db
def test_register_books_a_seat(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=2)
    regs = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
    assert [r.state for r in regs] == [RegistrationState.OPEN]
    assert seats.event_summary(event=Event.objects.get(pk=event.pk)).available == 1
