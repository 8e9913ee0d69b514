"""`manage.py lead_pass`: run the lead pass once and print its report."""

from django.core.management.base import BaseCommand

from leads.services import run_pass


class Command(BaseCommand):
    help = "Walk the queued lead requests once (the lead pass) and print the report."

    def handle(self, *args, **options):
        report = run_pass()
        self.stdout.write(str(report))
