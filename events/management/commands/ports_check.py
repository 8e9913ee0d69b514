from django.core.management.base import BaseCommand, CommandError

from events import ports


class Command(BaseCommand):
    help = "List what each host port is wired to; exit 1 when a refusing default is active."

    def handle(self, *args, **options):
        problems = []
        for w in ports.wiring():
            line = f"{w.port:<24} {w.setting:<26} {w.status:<9} {w.path}"
            if w.detail:
                line += f"  ({w.detail})"
            self.stdout.write(line)
            if w.status != "wired":
                problems.append(w.setting)
        if problems:
            raise CommandError(f"not wired: {', '.join(problems)} (see .env.example)", returncode=1)
        self.stdout.write("all four ports are wired")
