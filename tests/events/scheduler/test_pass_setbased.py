"""The scheduler pass, set-based (its cost per batch does not grow with the batch): compiled
template plans give exactly the text
`render` gives, the outbox takes one INSERT per batch whatever its size, and the pass's
statements per batch stay constant for mail and sms.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.db import connection
from django.template import Template
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.adapters import DatabaseTemplateRenderer
from events.db import outbox_sql
from events.models import MailOutbox, MailRegistration, Registration
from events.services import scheduler
from sms.models import SmsOutbox
from tests.events import factories
from tests.sms.gateway import wire as wire_gateway

DAY = timedelta(days=1)
_refs = itertools.count()

# Pieces of mail bodies: markup that values could be glued to (a bare "<", "&", an open
# entity, a comment, quotes), links whose url and label are values, and per-registration
# variables used plainly and otherwise (a filter, a tag reading them: no plan).
BODY_PIECES = [
    "Hello ",
    ", ",
    " ",
    "\n",
    "\n\n\n",
    "<p>",
    "</p>",
    "<br>",
    "<br/>",
    "<b>",
    "</b>",
    "&amp;",
    "&",
    "&l",
    "&#",
    "&amp",
    "<",
    "</",
    "<!-- ",
    " -->",
    '"',
    "'",
    "=",
    ";",
    "#",
    "lt",
    "(",
    ")",
    '<a href="',
    '<a title="',
    '">',
    "</a>",
    '<img alt="',
    "{{ event.name }}",
    "{{ event_begin }}",
    "{{ ticket.name }}",
    "{{ event.venue|default:'no venue' }}",
    "{% if event.venue %}at {{ event.venue }}{% endif %}",
    "{% for c in 'ab' %}[{{ c }}{{ registration.name }}]{% endfor %}",
    "{# a comment #}",
    "{{ registration.name }}",
    "{{ registration.company_name }}",
    "{{ registration.email }}",
    "{{ registration.barcode }}",
    "{{ tickets_url }}",
    "{{ ics_url }}",
    "{{ registration.name|upper }}",
    "{% if registration.company_name %}of {{ registration.company_name }}{% endif %}",
]
SUBJECT_PIECES = ["Hi ", "{{ registration.name }}", "  ", "\n", "{{ event.name }}", " & <x>"]
VALUE = st.one_of(
    st.sampled_from(["Ada", "Jean-Luc", "lt", "amp", "t;", "/", "i", "a@b", "#1", "x y"]),
    st.text(alphabet="aZé -/.:;#&<>\"'=\n\t\x1c\xa0lt", max_size=8),
)

pieces = st.lists(st.sampled_from(BODY_PIECES), min_size=1, max_size=8).map("".join)
subjects = st.lists(st.sampled_from(SUBJECT_PIECES), max_size=5).map("".join)


def _unsaved(event, ticket, pk: int, **values) -> Registration:
    return Registration(pk=pk, event=event, ticket=ticket, state="open", token_version=1, **values)


def _template(channel: str, subject: str, body: str) -> str:
    ref = f"plan-{next(_refs)}"
    factories.MessageTemplateFactory(ref=ref, channel=channel, subject=subject, body=body)
    return ref


def _one_by_one(ref: str, registrations, slot=None):
    return [
        DatabaseTemplateRenderer().render(template_ref=ref, registration=reg, slot=slot)
        for reg in registrations
    ]


@pytest.fixture
def shared(settings):
    settings.EVENT_PUBLIC_URL = "https://events.example.org"
    event = factories.EventFactory(
        name="Tom & Jerry's <Summit>",
        venue="Hall 'A'",
        date_begin=datetime(2027, 3, 11, 9, 0, tzinfo=UTC),
        date_end=datetime(2027, 3, 11, 17, 0, tzinfo=UTC),
    )
    ticket = factories.TicketFactory(event=event, name="VIP & co", price=Decimal("10"))
    return event, ticket


@pytest.mark.django_db
@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    channel=st.sampled_from(["mail", "sms"]),
    subject=subjects,
    body=pieces,
    people=st.lists(
        st.tuples(VALUE, VALUE, VALUE, st.sampled_from(["ada@example.org", "x&y@example.org"])),
        min_size=1,
        max_size=4,
    ),
    with_ticket=st.booleans(),
)
def test_a_batch_renders_exactly_what_render_gives_one_by_one(
    shared, channel, subject, body, people, with_ticket
):
    event, ticket = shared
    ref = _template(channel, subject, body)
    registrations = [
        _unsaved(
            event,
            ticket if with_ticket else None,
            1000 + i,
            name=name,
            company_name=company,
            barcode=barcode,
            email=email,
        )
        for i, (name, company, barcode, email) in enumerate(people)
    ]

    batch = DatabaseTemplateRenderer().render_many(template_ref=ref, registrations=registrations)

    assert batch == _one_by_one(ref, registrations)


# Where putting a value into the marked text would not give html_to_text's result: each case
# must be caught by one of the plan's checks (a value glued to "<" or to an open entity, a
# value in a tag, a link whose label equals its url, text left with "<" after stripping, a
# value with spaces or line breaks the text would trim).
HAZARDS = [
    ("<{{ registration.name }}>x", "b"),
    ("&l{{ registration.name }}", "t;"),
    ("<b></b>&l{{ registration.name }}", "t;"),
    ("&<b></b>{{ registration.name }}", "lt"),
    ("a<br {{ registration.name }}>b", "/"),
    ('<a href="{{ registration.email }}">{{ registration.name }}</a>', "a@b"),
    ("<<b></b>{{ registration.name }}>", "i"),
    ("<p>{{ registration.name }}</p>", "  x"),
    ("<p>{{ registration.name }}</p>", "a\nb"),
    ("<p>{{ registration.name }}</p><p></p>\n\n<p>z</p>", ""),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "name"), HAZARDS)
def test_a_value_that_would_change_how_the_html_reads_gets_the_text_the_long_way(
    shared, body, name
):
    event, ticket = shared
    ref = _template("mail", "s", body)
    registrations = [_unsaved(event, ticket, 1, name=name, email="a@b")]

    batch = DatabaseTemplateRenderer().render_many(template_ref=ref, registrations=registrations)

    assert batch == _one_by_one(ref, registrations)


@pytest.mark.django_db
def test_a_value_that_is_not_text_renders_the_long_way(shared):
    event, ticket = shared
    ref = _template("mail", "{{ registration.name }}", "<p>{{ registration.name }}</p>")
    registrations = [
        _unsaved(event, ticket, 1, name="Ada"),
        _unsaved(event, ticket, 2, name=None),  # an unsaved instance; the template says "None"
    ]

    batch = DatabaseTemplateRenderer().render_many(template_ref=ref, registrations=registrations)

    assert batch == _one_by_one(ref, registrations)
    assert batch[1].body_html == "<p>None</p>"


@pytest.mark.django_db
def test_a_plain_template_runs_the_template_language_once_per_batch_not_per_message(shared):
    event, ticket = shared
    ref = _template(
        "mail",
        "Reminder: {{ event.name }}",
        "<p>Hello {{ registration.name }},</p><p>{{ event.name }} starts {{ event_begin }}.</p>"
        '<p><a href="{{ tickets_url }}">your tickets</a></p>',
    )
    registrations = [_unsaved(event, ticket, 1 + i, name=f"Guest {i}") for i in range(50)]
    renderer = DatabaseTemplateRenderer()

    with mock.patch.object(Template, "render", autospec=True, side_effect=Template.render) as runs:
        batch = renderer.render_many(template_ref=ref, registrations=registrations)

    assert runs.call_count == 2  # the subject and the body of one plan, for 50 messages
    assert batch == _one_by_one(ref, registrations)
    assert batch[7].body_text.startswith("Hello Guest 7,\n")
    assert "your tickets (https://events.example.org/my-tickets/" in batch[7].body_text


@pytest.mark.django_db
def test_a_template_reading_a_registration_value_in_a_tag_renders_per_message(shared):
    event, ticket = shared
    ref = _template(
        "mail", "s", "{% if registration.company_name %}{{ registration.company_name }}{% endif %}"
    )
    registrations = [
        _unsaved(event, ticket, 1, company_name=""),
        _unsaved(event, ticket, 2, company_name="ACME"),
    ]

    with mock.patch.object(Template, "render", autospec=True, side_effect=Template.render) as runs:
        batch = DatabaseTemplateRenderer().render_many(
            template_ref=ref, registrations=registrations
        )

    assert runs.call_count == 4
    assert [m.body_html for m in batch] == ["", "ACME"]


@pytest.mark.django_db
def test_plans_follow_the_shared_context_by_value_not_by_object(shared):
    event, ticket = shared
    ref = _template("sms", "", "{{ event.name }}: {{ registration.name }}")
    renderer = DatabaseTemplateRenderer()
    first = renderer.render_many(
        template_ref=ref, registrations=[_unsaved(event, ticket, 1, name="Ada")]
    )
    event.name = "Renamed"  # an edit between two batches of one pass

    second = renderer.render_many(
        template_ref=ref, registrations=[_unsaved(event, ticket, 1, name="Ada")]
    )

    assert first[0].body_text == "Tom & Jerry's <Summit>: Ada"
    assert second[0].body_text == "Renamed: Ada"


@pytest.mark.django_db
def test_slot_times_win_in_a_plan_as_in_render():
    event = factories.EventFactory(
        is_multi_slots=True,
        date_begin=datetime(2027, 3, 11, 8, 0, tzinfo=UTC),
        date_end=datetime(2027, 3, 12, 17, 0, tzinfo=UTC),
    )
    slots = [
        factories.SlotFactory(
            event=event,
            start_datetime=datetime(2027, 3, 11 + i, 13, 0, tzinfo=UTC),
            end_datetime=datetime(2027, 3, 11 + i, 15, 0, tzinfo=UTC),
        )
        for i in range(2)
    ]
    ref = _template("sms", "", "{{ registration.name }} at {{ event_begin }}")
    registrations = [
        Registration(pk=i, event=event, slot=slots[i % 2], name=f"G{i}", token_version=1)
        for i in range(4)
    ]

    batch = DatabaseTemplateRenderer().render_many(template_ref=ref, registrations=registrations)

    assert batch == _one_by_one(ref, registrations)
    assert batch[1].body_text == "G1 at Friday 12 March 2027, 14:00 (Europe/Brussels)"


# --- the outbox write ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_insert_batch_is_one_statement_fills_defaults_and_skips_existing_keys(now):
    columns = (("idempotency_key", "text"), ("message_id", "text"), ("recipient", "text"))
    columns += (("subject", "text"), ("body_text", "text"), ("body_html", "text"))
    rows = [(f"k{i}", f"<k{i}@x>", f"r{i}@example.org", "S", "T", "") for i in range(3)]
    with CaptureQueriesContext(connection) as ctx:
        written = outbox_sql.insert_batch(
            model=MailOutbox,
            columns=columns,
            rows=rows,
            constants={"next_attempt_at": now},
            now=now,
        )
        again = outbox_sql.insert_batch(
            model=MailOutbox,
            columns=columns,
            rows=[rows[0], ("k9", "<k9@x>", "new@example.org", "S", "T", "")],
            constants={"next_attempt_at": now},
            now=now,
        )

    assert (written, again, len(ctx.captured_queries)) == (3, 1, 2)
    row = MailOutbox.objects.get(idempotency_key="k1")
    assert (row.state, row.attempts, row.last_error, row.sent_at) == ("queued", 0, "", None)
    assert row.next_attempt_at == now and row.created_at == now
    assert row.scheduler_id is None and row.registration_id is None
    with pytest.raises(ValueError, match="no column"):
        outbox_sql.insert_batch(
            model=MailOutbox, columns=[("nope", "text")], rows=[("x",)], constants={}, now=now
        )


def _outbox_inserts(channel: str, size: int, batch: int, settings, actor) -> list[int]:
    """Run one reminder pass over `size` attendees; the parameter count of each outbox INSERT."""
    settings.EVENT_MAIL_BATCH = batch
    begin = datetime(2027, 3, 11, 9, 0, tzinfo=UTC)
    event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
    for i in range(size):
        factories.RegistrationFactory(event=event, phone=f"0470 12 {i:02d} 00")
    ref = _template(channel, "" if channel == "sms" else "Hi", "{{ registration.name }}")
    scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="days",
        interval_type="before_event",
        template_ref=ref,
        notification_type=channel,
        actor=actor,
    )
    table = (SmsOutbox if channel == "sms" else MailOutbox)._meta.db_table
    inserts: list[int] = []

    def count(execute, sql, params, many, context):
        if sql.startswith(f'INSERT INTO "{table}"'):
            inserts.append(len(params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        report = scheduler.run_pass(now=begin - DAY)
    assert report.messages_queued == size and report.errors == 0
    return inserts


@pytest.mark.django_db
@pytest.mark.parametrize("channel", ["mail", "sms"])
def test_the_outbox_takes_one_insert_per_batch_with_as_many_parameters_for_any_size(
    channel, settings, httpserver, actor
):
    wire_gateway(settings, httpserver)  # every port wired; sms: the gateway outbox

    small = _outbox_inserts(channel, 6, 3, settings, actor)
    large = _outbox_inserts(channel, 40, 20, settings, actor)

    assert len(small) == len(large) == 2  # one statement per batch
    assert set(small) == set(large)  # one array per column, not one value per message


@pytest.mark.django_db
@pytest.mark.parametrize("channel", ["mail", "sms"])
def test_after_sub_marks_each_row_sent_once_with_its_outcome(channel, settings, httpserver, actor):
    wire_gateway(settings, httpserver)  # every port wired; sms: the gateway outbox
    settings.EVENT_MAIL_BATCH = 4
    event = factories.EventFactory()
    regs = [
        factories.RegistrationFactory(
            event=event,
            email="" if i == 1 else f"g{i}@example.org",
            phone="" if i == 1 else f"0470 12 {i:02d} 00",
        )
        for i in range(9)
    ]
    ref = _template(channel, "" if channel == "sms" else "Hi", "{{ registration.name }}")
    mail = scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        include_existing=True,
        template_ref=ref,
        notification_type=channel,
        actor=actor,
    )

    report = scheduler.run_pass(now=datetime.now(UTC) + timedelta(minutes=1))
    again = scheduler.run_pass(now=datetime.now(UTC) + timedelta(minutes=2))

    skipped = "skipped_no_phone" if channel == "sms" else "skipped_no_email"
    outcomes = dict(
        MailRegistration.objects.filter(scheduler=mail).values_list("registration_id", "outcome")
    )
    assert outcomes == {r.pk: skipped if i == 1 else "sent" for i, r in enumerate(regs)}
    assert (report.messages_queued, report.skipped, again.messages_queued) == (8, 1, 0)
    outbox = SmsOutbox if channel == "sms" else MailOutbox
    assert sorted(outbox.objects.values_list("registration_id", flat=True)) == sorted(
        r.pk for i, r in enumerate(regs) if i != 1
    )
    if channel == "sms":
        assert set(SmsOutbox.objects.values_list("to", flat=True)) == {
            f"+3247012{i:02d}00" for i in range(9) if i != 1
        }
