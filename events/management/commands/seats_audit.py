from django.core.management.base import BaseCommand

from events.models import Event
from events.services import seats


class Command(BaseCommand):
    help = "Recount every event's seats from its registrations; exit 1 on any difference."

    def add_arguments(self, parser):
        parser.add_argument("--event", type=int, help="Audit only this event id.")

    def handle(self, *args, **options):
        events = Event.objects.order_by("pk")
        if options["event"]:
            events = events.filter(pk=options["event"])
        bad = 0
        checked = 0
        for event in events.iterator():
            checked += 1
            for problem in seats.audit(event=event):
                bad += 1
                self.stderr.write(f"event {event.pk} ({event.name}): {problem}")
        if bad:
            self.stderr.write(f"seats_audit: {bad} difference(s) in {checked} event(s)")
            raise SystemExit(1)
        self.stdout.write(f"seats_audit: {checked} event(s) consistent")
