from django.core.management.base import BaseCommand

from events.services import scheduler


class Command(BaseCommand):
    help = "Run the communication scheduler pass once and print its report."

    def handle(self, *args, **options):
        report = scheduler.run_pass()
        self.stdout.write(str(report))
