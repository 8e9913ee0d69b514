from django.core.management.base import BaseCommand

from events.services import events as event_services


class Command(BaseCommand):
    help = "Mark done every finished event that is not in a pipe_end stage (idempotent)."

    def handle(self, *args, **options):
        count = event_services.done_sweep()
        self.stdout.write(f"{count} event(s) marked done")
