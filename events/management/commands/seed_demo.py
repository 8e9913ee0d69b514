"""A realistic demo conference, loaded through the services; running it again changes nothing.

Grows with every capability so that `make run` shows everything that exists.
"""

from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from events import hooks
from events.models import (
    Event,
    EventLogo,
    EventType,
    MessageTemplate,
    Question,
    QuestionChoice,
    Tag,
    TagCategory,
    Ticket,
    TypeMail,
)
from events.services import events as event_services
from events.services import logos
from events.services import registrations as registration_services
from events.services.audit import Actor

ACTOR = Actor("system", label="seed_demo")
TYPE_NAME = "Conference"
SUMMIT = "Open Source Summit"
WORKSHOPS = "Hands-on Django Workshops"
SOLD_OUT = "Python Meetup: Sold-out Night"

TEMPLATES = [
    {
        "ref": "registration-confirmation",
        "name": "Registration confirmation",
        "channel": "mail",
        "subject": "You're registered: {{ event.name }}",
        "body": (
            "<p>Hello {{ registration.name }},</p>\n"
            "<p>your seat for <strong>{{ event.name }}</strong> is confirmed.</p>\n"
            "<p>When: {{ event_begin }}<br>Where: {{ event.venue }}</p>\n"
            '<p>Your tickets and QR code: <a href="{{ tickets_url }}">{{ tickets_url }}</a><br>\n'
            'Add it to your calendar: <a href="{{ ics_url }}">{{ ics_url }}</a></p>'
        ),
        "translations": {
            "fr": {
                "subject": "Vous êtes inscrit : {{ event.name }}",
                "body": (
                    "<p>Bonjour {{ registration.name }},</p>\n"
                    "<p>votre place pour <strong>{{ event.name }}</strong> est confirmée.</p>\n"
                    "<p>Quand : {{ event_begin }}<br>Où : {{ event.venue }}</p>\n"
                    "<p>Vos billets et votre code QR : "
                    '<a href="{{ tickets_url }}">{{ tickets_url }}</a><br>\n'
                    "Ajoutez-le à votre calendrier : "
                    '<a href="{{ ics_url }}">{{ ics_url }}</a></p>'
                ),
            },
            "nl": {
                "subject": "U bent ingeschreven: {{ event.name }}",
                "body": (
                    "<p>Beste {{ registration.name }},</p>\n"
                    "<p>uw plaats voor <strong>{{ event.name }}</strong> is bevestigd.</p>\n"
                    "<p>Wanneer: {{ event_begin }}<br>Waar: {{ event.venue }}</p>\n"
                    "<p>Uw tickets en QR-code: "
                    '<a href="{{ tickets_url }}">{{ tickets_url }}</a><br>\n'
                    'Zet het in uw agenda: <a href="{{ ics_url }}">{{ ics_url }}</a></p>'
                ),
            },
            "de": {
                "subject": "Sie sind angemeldet: {{ event.name }}",
                "body": (
                    "<p>Guten Tag {{ registration.name }},</p>\n"
                    "<p>Ihr Platz für <strong>{{ event.name }}</strong> ist bestätigt.</p>\n"
                    "<p>Wann: {{ event_begin }}<br>Wo: {{ event.venue }}</p>\n"
                    "<p>Ihre Tickets und Ihr QR-Code: "
                    '<a href="{{ tickets_url }}">{{ tickets_url }}</a><br>\n'
                    "In Ihren Kalender eintragen: "
                    '<a href="{{ ics_url }}">{{ ics_url }}</a></p>'
                ),
            },
        },
    },
    {
        "ref": "event-reminder",
        "name": "Reminder (one day before)",
        "channel": "mail",
        "subject": "Tomorrow: {{ event.name }}",
        "body": (
            "<p>Hello {{ registration.name }},</p>\n"
            "<p>{{ event.name }} starts {{ event_begin }}. {{ event.ticket_instructions }}</p>\n"
            '<p>Show this QR code at the desk: <a href="{{ tickets_url }}">your tickets</a></p>'
        ),
        "translations": {
            "fr": {
                "subject": "Demain : {{ event.name }}",
                "body": (
                    "<p>Bonjour {{ registration.name }},</p>\n"
                    "<p>{{ event.name }} commence le {{ event_begin }}. "
                    "{{ event.ticket_instructions }}</p>\n"
                    "<p>Présentez ce code QR à l'accueil : "
                    '<a href="{{ tickets_url }}">vos billets</a></p>'
                ),
            },
            "nl": {
                "subject": "Morgen: {{ event.name }}",
                "body": (
                    "<p>Beste {{ registration.name }},</p>\n"
                    "<p>{{ event.name }} begint op {{ event_begin }}. "
                    "{{ event.ticket_instructions }}</p>\n"
                    "<p>Toon deze QR-code aan het onthaal: "
                    '<a href="{{ tickets_url }}">uw tickets</a></p>'
                ),
            },
            "de": {
                "subject": "Morgen: {{ event.name }}",
                "body": (
                    "<p>Guten Tag {{ registration.name }},</p>\n"
                    "<p>{{ event.name }} beginnt am {{ event_begin }}. "
                    "{{ event.ticket_instructions }}</p>\n"
                    "<p>Zeigen Sie diesen QR-Code am Einlass: "
                    '<a href="{{ tickets_url }}">Ihre Tickets</a></p>'
                ),
            },
        },
    },
    {
        "ref": "event-reminder-sms",
        "name": "Reminder by SMS",
        "channel": "sms",
        "subject": "",
        "body": "{{ event.name }} starts {{ event_begin }}. Tickets: {{ tickets_url }}",
        "translations": {
            "fr": {
                "body": "{{ event.name }} commence le {{ event_begin }}. "
                "Billets : {{ tickets_url }}"
            },
            "nl": {
                "body": "{{ event.name }} begint op {{ event_begin }}. Tickets: {{ tickets_url }}"
            },
            "de": {
                "body": "{{ event.name }} beginnt am {{ event_begin }}. Tickets: {{ tickets_url }}"
            },
        },
    },
]

# The summit in the four languages: its own texts (the columns are English, its default) and
# its type's lines, which the summit copies.
SUMMIT_TEXTS = {
    "fr": {
        "name": "Sommet de l'open source",
        "description": "Deux jours de conférences et d'ateliers sur l'exploitation de logiciels "
        "libres en production.",
        "venue": "Square – Centre de congrès de Bruxelles",
        "ticket_instructions": "Présentez le code QR sur votre téléphone ou imprimé ; ouverture "
        "des portes à 8 h 30.",
    },
    "nl": {
        "name": "Opensourcetop",
        "description": "Twee dagen lezingen en workshops over opensourcesoftware in productie.",
        "venue": "Square – Congrescentrum Brussel",
        "ticket_instructions": "Toon de QR-code op uw telefoon of afgedrukt; de deuren gaan open "
        "om 8.30 uur.",
    },
    "de": {
        "name": "Open-Source-Gipfel",
        "description": "Zwei Tage Vorträge und Workshops zum Betrieb von Open-Source-Software in "
        "der Produktion.",
        "venue": "Square – Kongresszentrum Brüssel",
        "ticket_instructions": "Zeigen Sie den QR-Code auf Ihrem Telefon oder ausgedruckt vor; "
        "Einlass ab 8:30 Uhr.",
    },
}
# (fr, nl, de) of a line's text.
LINE_TEXTS = {
    "Community": ("Communauté", "Gemeenschap", "Gemeinschaft"),
    "Standard": ("Standard", "Standaard", "Standard"),
    "Supporter": ("Soutien", "Supporter", "Förderer"),
    "T-shirt size": ("Taille de t-shirt", "T-shirtmaat", "T-Shirt-Größe"),
    "Company": ("Société", "Bedrijf", "Firma"),
    "Dietary requirements": ("Régime alimentaire", "Dieetwensen", "Ernährungswünsche"),
    "How did you hear of us?": (
        "Comment avez-vous entendu parler de nous ?",
        "Hoe hebt u over ons gehoord?",
        "Wie haben Sie von uns erfahren?",
    ),
    "A colleague": ("Un ou une collègue", "Een collega", "Durch Kollegen"),
    "Social media": ("Réseaux sociaux", "Sociale media", "Soziale Medien"),
    "Newsletter": ("Lettre d'information", "Nieuwsbrief", "Newsletter"),
    "Other": ("Autre", "Andere", "Sonstiges"),
}
# The summit's first attendees register in these languages (their mails go out in them).
ATTENDEE_LANGUAGES = ("en", "fr", "nl", "de", "fr", "nl")


def _texts(text: str, field: str) -> dict[str, dict[str, str]]:
    """The translations of one line's text, {"fr": {field: …}, …} (none for a size)."""
    found = LINE_TEXTS.get(text)
    return (
        {}
        if found is None
        else {lang: {field: t} for lang, t in zip(("fr", "nl", "de"), found, strict=True)}
    )


ATTENDEES = [
    ("Ada Lovelace", "ada@example.org", "+44 20 7946 0000", "Analytical Engines Ltd"),
    ("Grace Hopper", "grace@example.org", "+1 202 555 0143", "US Navy"),
    ("Alan Turing", "alan@example.org", "+44 161 496 0000", "Bletchley Park"),
    ("Katherine Johnson", "katherine@example.org", "+1 757 555 0199", "NASA"),
    ("Linus Torvalds", "linus@example.org", "+1 503 555 0110", "Linux Foundation"),
    ("Margaret Hamilton", "margaret@example.org", "+1 617 555 0175", "Hamilton Technologies"),
    ("Guido van Rossum", "guido@example.org", "+31 20 555 0101", "Python Software Foundation"),
    ("Barbara Liskov", "barbara@example.org", "+1 617 555 0134", "MIT"),
]


class Command(BaseCommand):
    help = "Load the demo conference (idempotent)."

    def handle(self, *args, **options):
        with transaction.atomic():
            for spec in TEMPLATES:
                MessageTemplate.objects.get_or_create(ref=spec["ref"], defaults=spec)
            event_type = self._event_type()
            summit = Event.objects.filter(name=SUMMIT).first() or self._summit(event_type)
            workshops = Event.objects.filter(name=WORKSHOPS).first() or self._workshops()
            # The organiser's logo, printed on the summit's PDF tickets and name badges.
            if not EventLogo.objects.filter(event=summit).exists():
                logos.set_logo(event=summit, content=_demo_logo(), actor=ACTOR)
            # A sold-out evening with a waiting list (one offer open), so the demo shows an offer.
            if not Event.objects.filter(name=SOLD_OUT).exists():
                _sold_out_with_waiting_list()
            # Overlays add their own demo rows (idempotent each; seams: inbox messages).
            hooks.run(hooks.seed_demo, summit=summit, workshops=workshops, stdout=self.stdout)
        self.stdout.write(
            f"demo: event type '{event_type.name}', events #{summit.pk} '{summit.name}' and "
            f"#{workshops.pk} '{workshops.name}'"
        )

    def _event_type(self) -> EventType:
        existing = EventType.objects.filter(name=TYPE_NAME).first()
        if existing:
            return existing
        topic, _ = TagCategory.objects.get_or_create(name="Topic", defaults={"sequence": 1})
        audience, _ = TagCategory.objects.get_or_create(name="Audience", defaults={"sequence": 2})
        tags = [
            Tag.objects.get_or_create(name="Open source", category=topic, defaults={"color": 3})[0],
            Tag.objects.get_or_create(name="Python", category=topic, defaults={"color": 4})[0],
            Tag.objects.get_or_create(name="Developers", category=audience, defaults={"color": 5})[
                0
            ],
            Tag.objects.get_or_create(
                name="VIP follow-up", category=audience, defaults={"color": 0}
            )[0],
        ]
        event_type = EventType.objects.create(
            name=TYPE_NAME,
            note="Check the venue's accessibility notes before publishing.",
            ticket_instructions="Bring the QR code on your phone or printed; doors open 8:30.",
            default_timezone="Europe/Brussels",
            has_seats_limitation=True,
            seats_max=120,
            # Attendees cancel a free registration themselves until two days before the start.
            cancel_deadline_hours=48,
        )
        event_type.tags.set(tags)
        Ticket.objects.create(
            event_type=event_type,
            name="Community",
            translations=_texts("Community", "name"),
            sequence=1,
            seats_max=40,
            price=Decimal("0"),
            limit_max_per_order=4,
        )
        Ticket.objects.create(
            event_type=event_type,
            name="Standard",
            translations=_texts("Standard", "name"),
            sequence=2,
            price=Decimal("149.00"),
            product_ref="PROD-CONF-STD",
            limit_max_per_order=10,
        )
        Ticket.objects.create(
            event_type=event_type,
            name="Supporter",
            translations=_texts("Supporter", "name"),
            sequence=3,
            seats_max=20,
            price=Decimal("399.00"),
            product_ref="PROD-CONF-SUP",
            limit_max_per_order=2,
        )
        shirt = Question.objects.create(
            event_type=event_type,
            title="T-shirt size",
            question_type="simple_choice",
            sequence=1,
            translations=_texts("T-shirt size", "title"),
        )
        for i, size in enumerate(["S", "M", "L", "XL"]):
            QuestionChoice.objects.create(question=shirt, name=size, sequence=i)
        Question.objects.create(
            event_type=event_type,
            title="Company",
            question_type="company_name",
            sequence=2,
            translations=_texts("Company", "title"),
        )
        Question.objects.create(
            event_type=event_type,
            title="Dietary requirements",
            question_type="text_box",
            sequence=3,
            translations=_texts("Dietary requirements", "title"),
        )
        found = Question.objects.create(
            event_type=event_type,
            title="How did you hear of us?",
            question_type="simple_choice",
            once_per_order=True,
            is_mandatory_answer=True,
            sequence=4,
            translations=_texts("How did you hear of us?", "title"),
        )
        for i, channel in enumerate(["A colleague", "Social media", "Newsletter", "Other"]):
            QuestionChoice.objects.create(
                question=found, name=channel, sequence=i, translations=_texts(channel, "name")
            )
        TypeMail.objects.create(
            event_type=event_type,
            sequence=1,
            interval_nbr=0,
            interval_unit="now",
            interval_type="after_sub",
            template_ref="registration-confirmation",
        )
        TypeMail.objects.create(
            event_type=event_type,
            sequence=2,
            interval_nbr=1,
            interval_unit="days",
            interval_type="before_event",
            template_ref="event-reminder",
        )
        TypeMail.objects.create(
            event_type=event_type,
            sequence=3,
            interval_nbr=2,
            interval_unit="hours",
            interval_type="before_event",
            template_ref="event-reminder-sms",
            notification_type="sms",
        )
        # Overlays add their template lines (booths: booth lines) through the explicit hook.
        hooks.run(hooks.seed_demo_type, event_type)
        return event_type

    def _summit(self, event_type: EventType) -> Event:
        today = timezone.now().date()
        begin = _at(today + timedelta(days=30), time(9), "Europe/Brussels")
        event = event_services.create_event(
            name=SUMMIT,
            date_begin=begin,
            date_end=begin + timedelta(days=1, hours=9),
            event_type=event_type,
            actor=ACTOR,
            venue="Square – Brussels Meeting Centre",
            address="Mont des Arts, 1000 Brussels",
            country="BE",
            organizer="Open Source Foundation Europe",
            description="Two days of talks and workshops on running open-source software "
            "in production.",
            lang="en",
            translations=SUMMIT_TEXTS,
        )
        event = event_services.publish(event=event, actor=ACTOR)
        community = event.tickets.get(name="Community")
        shirt = event.questions.get(title="T-shirt size")
        found = event.questions.get(title="How did you hear of us?")
        regs = []
        for i, (name, email, phone, company) in enumerate(ATTENDEES[:6]):
            regs += registration_services.register(
                event=event,
                ticket=community,
                attendees=[
                    {
                        "name": name,
                        "email": email,
                        "phone": phone,
                        "company_name": company,
                        "answers": {
                            shirt.pk: shirt.choices.all()[i % 4].pk,
                            found.pk: found.choices.all()[i % 4].pk,
                        },
                    }
                ],
                utm={"source": "newsletter" if i % 2 else "social"},
                lang=ATTENDEE_LANGUAGES[i],
                actor=ACTOR,
            )
        # Every state: attended, cancelled, unconfirmed (draft), and a partner-sourced order.
        # regs[3:] stay open and free, a month ahead: their tickets pages offer "Cancel my
        # registration" (self-service, until the type's 48-hour deadline); the order's sold
        # registration says to contact the organiser.
        registration_services.mark_attended(registration=regs[0], actor=ACTOR)
        registration_services.cancel(registration=regs[1], actor=ACTOR)
        registration_services.reset_to_draft(registration=regs[2], actor=ACTOR)
        name, email, phone, company = ATTENDEES[6]
        registration_services.register(
            event=event,
            ticket=event.tickets.get(name="Standard"),
            attendees=[{"name": name, "email": email, "phone": phone, "company_name": company}],
            partner_ref="P-1007",
            sale_order_ref="SO-2041",
            sale_order_line_ref="SO-2041/1",
            sale_status="sold",
            contact_sources=["partner"],
            actor=ACTOR,
        )
        _history(event, shirt=shirt, found=found)
        return event

    def _workshops(self) -> Event:
        today = timezone.now().date()
        first = today + timedelta(days=14)
        tz = "Europe/Brussels"
        event = event_services.create_event(
            name=WORKSHOPS,
            date_begin=_at(first, time(8), tz),
            date_end=_at(first + timedelta(days=2), time(18), tz),
            date_tz=tz,
            actor=ACTOR,
            is_multi_slots=True,
            seats_limited=True,
            seats_max=12,
            venue="Learning Lab, Ghent",
            country="BE",
            description="Three morning workshops; pick the day that suits you.",
            ticket_instructions="Bring a laptop with Python 3.11.",
        )
        slots = [
            event_services.add_slot(
                event=event,
                date=first + timedelta(days=d),
                start_hour=9.0,
                end_hour=12.5,
                actor=ACTOR,
            )
            for d in range(3)
        ]
        event = event_services.publish(event=event, actor=ACTOR)
        for i, (name, email, phone, company) in enumerate(ATTENDEES):
            registration_services.register(
                event=event,
                slot=slots[i % 3],
                attendees=[{"name": name, "email": email, "phone": phone, "company_name": company}],
                state="draft" if i == 7 else "open",
                actor=ACTOR,
            )
        return event


FIRST_NAMES = ["Hedy", "Edsger", "Frances", "Donald", "Radia", "Ken", "Sophie", "Tim", "Anita"]
LAST_NAMES = ["Lamarr", "Dijkstra", "Allen", "Knuth", "Perlman", "Thompson", "Wilson", "Berners"]
# Every fifth attendee's name is in another script, so the badges and tickets show them all.
WORLD_NAMES = [
    "Zoë Ångström-Dvořák",
    "Αλέξανδρος Παπαδόπουλος",
    "Дмитрий Иванов",
    "محمد عبد الله",
    "王小明",
    "山田さくら",
    "김민준",
]
# Registrations per day over the two weeks before today (oldest first): a launch peak, a
# quiet middle and the reminder bump, so the dashboard's charts show a real shape.
HISTORY = [7, 4, 2, 1, 0, 2, 1, 3, 1, 0, 2, 4, 3, 2]


def _history(event: Event, *, shirt: Question, found: Question) -> None:
    """Registrations spread over the last two weeks, some of them checked in.

    Each goes through `registration_services.register` (seats, answers, audit, scheduler
    rows) and check-ins through `mark_attended`. Only the dates are then moved back, with one
    seed-only UPDATE of `created_at` / `confirmed_at`: services stamp "now" and have no
    back-dating verb on purpose (a real registration is never back-dated). The audit rows
    keep their true time (the seed's run), so the audit log stays honest about when rows
    were written.
    """
    from events.models import Registration

    tickets = [event.tickets.get(name="Community"), event.tickets.get(name="Standard")]
    now = timezone.now()
    n = 0
    for days_ago, count in zip(range(len(HISTORY), 0, -1), HISTORY, strict=True):
        for i in range(count):
            n += 1
            name = f"{FIRST_NAMES[n % len(FIRST_NAMES)]} {LAST_NAMES[n % len(LAST_NAMES)]} {n}"
            if n % 5 == 0:
                name = WORLD_NAMES[(n // 5) % len(WORLD_NAMES)]
            ticket = tickets[n % 2]
            extra = (
                {"sale_order_ref": f"SO-3{n:03d}", "sale_status": "sold"} if ticket.price else {}
            )
            (reg,) = registration_services.register(
                event=event,
                ticket=ticket,
                attendees=[
                    {
                        "name": name,
                        "email": f"attendee{n}@example.org",
                        "answers": {
                            shirt.pk: shirt.choices.all()[n % 4].pk,
                            found.pk: found.choices.all()[n % 4].pk,
                        },
                    }
                ],
                utm={"source": ("newsletter", "social", "partner")[n % 3]},
                actor=ACTOR,
                **extra,
            )
            when = now - timedelta(days=days_ago, hours=(i * 3) % 9)
            Registration.objects.filter(pk=reg.pk).update(created_at=when, confirmed_at=when)
            if n % 4 == 0:
                registration_services.mark_attended(registration=reg, actor=ACTOR)


WAITING = [
    ("Hedy Lamarr", "hedy@example.org"),
    ("Edsger Dijkstra", "edsger@example.org"),
    ("Frances Allen", "frances@example.org"),
    ("Donald Knuth", "donald@example.org"),
]


def _sold_out_with_waiting_list() -> Event:
    """Four seats, four registrations, four people waiting; one registration is then cancelled
    and the freed seat offered to the first of them (held for EVENT_WAITLIST_OFFER_HOURS, its
    mail on the outbox): the admin's waiting list shows one offered and three waiting."""
    from events.services import waitlist

    tz = "Europe/Brussels"
    begin = _at(timezone.now().date() + timedelta(days=21), time(19), tz)
    event = event_services.create_event(
        name=SOLD_OUT,
        date_begin=begin,
        date_end=begin + timedelta(hours=3),
        date_tz=tz,
        actor=ACTOR,
        seats_limited=True,
        seats_max=4,
        venue="Café Python, Leuven",
        country="BE",
        description="Lightning talks and pizza. Sold out: join the waiting list.",
    )
    event = event_services.publish(event=event, actor=ACTOR)
    regs = [
        registration_services.register(
            event=event, attendees=[{"name": name, "email": email}], actor=ACTOR
        )[0]
        for name, email, _, _ in ATTENDEES[:4]
    ]
    for name, email in WAITING:
        waitlist.join(event=event, name=name, email=email, actor=ACTOR)
    registration_services.cancel(registration=regs[3], actor=ACTOR)
    waitlist.offer_freed_seats(event=event)
    return event


def _at(day: date, at: time, tz: str) -> datetime:
    import zoneinfo

    return datetime.combine(day, at, tzinfo=zoneinfo.ZoneInfo(tz))


def _demo_logo() -> bytes:
    """A made-up organiser's logo (drawn here: the demo ships no image file)."""
    from io import BytesIO

    from PIL import Image, ImageDraw

    image = Image.new("RGBA", (360, 120), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, 359, 119), radius=24, fill=(18, 70, 140, 255))
    for i, colour in enumerate([(255, 196, 0), (0, 170, 120), (230, 60, 60)]):
        x = 24 + i * 44
        draw.ellipse((x, 30, x + 60, 90), fill=(*colour, 230))
    for i in range(3):
        draw.rounded_rectangle(
            (170, 28 + i * 24, 330 - i * 40, 44 + i * 24), radius=8, fill=(255, 255, 255, 255)
        )
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
