"""The calendar file of one registration (spec.md §7.2), built with `icalendar`.

Invariants:
- the UID is stable for a registration and holds no personal data (ids only, never the
  name, email or barcode); SEQUENCE is the event's `ics_sequence` (bumped when times change);
- times are the slot's on a multi-slot event; they carry the event's TZID with a matching
  VTIMEZONE (UTC events use UTC times and no VTIMEZONE);
- a cancelled registration or a cancelled event gives STATUS:CANCELLED, otherwise CONFIRMED;
- the output uses CRLF line ends and folds lines at 75 octets (icalendar's serializer);
- the rendered file is cached (a small LRU per process, then the shared Redis cache) under a
  fingerprint of everything it is rendered from (`CalendarData`, the settings and code it
  depends on): whatever changes what the file shows changes the key, so an entry is never
  stale. DTSTAMP is set on every answer. A cancelled calendar is never cached; a cache fault
  only costs a render.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
import zoneinfo
from collections import OrderedDict
from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import icalendar
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.text import slugify
from django.utils.translation import gettext
from redis.exceptions import RedisError

from events import i18n
from events.models import KanbanState, Registration, RegistrationState
from events.services import capability, links

logger = logging.getLogger(__name__)

PRODID = "-//backbone-events//attendee calendar//EN"
CACHE_SECONDS = 24 * 3600  # entries are never stale (content-addressed): this only bounds memory
# Rendered with this DTSTAMP, replaced by the answer's own: one cached file serves every request.
_STAMP_PLACEHOLDER = datetime(1970, 1, 1, tzinfo=UTC)
_STAMP_LINE = b"\r\nDTSTAMP:19700101T000000Z\r\n"


class CalendarData(NamedTuple):
    """Everything a calendar file is rendered from (the rest is settings and code, which
    `_environment` covers). Anything added to the file must come from here, so that it is
    part of the cache key."""

    registration_id: int
    event_id: int
    token_version: int  # the my-tickets link in DESCRIPTION and URL carries it
    lang: str  # the registration's language: the texts below are in it
    tickets_label: str  # "Your tickets: %(url)s" in that language
    state: str
    kanban_state: str
    slot_id: int | None
    name: str
    begin: datetime
    end: datetime
    tz_name: str
    sequence: int
    instructions: str
    venue: str
    address: str


class CalendarFile(NamedTuple):
    filename: str
    body: bytes


def calendar_data(registration: Registration) -> CalendarData:
    """What the calendar of a registration shows (its event, and its slot on a multi-slot
    event, loaded with it)."""
    event = registration.event
    slot = registration.slot if event.is_multi_slots else None
    lang = i18n.choose(registration.lang, event=event)
    with translation.override(lang):
        tickets_label = gettext("Your tickets: %(url)s")
    return CalendarData(
        registration_id=registration.pk,
        event_id=registration.event_id,
        token_version=registration.token_version,
        lang=lang,
        tickets_label=tickets_label,
        state=str(registration.state),  # a plain str (not a Choices member): a stable key
        kanban_state=str(event.kanban_state),
        slot_id=slot.pk if slot is not None else None,
        name=i18n.localized(event, "name", lang),
        begin=slot.start_datetime if slot is not None else event.date_begin,
        end=slot.end_datetime if slot is not None else event.date_end,
        tz_name=event.date_tz or "UTC",
        sequence=event.ics_sequence,
        instructions=i18n.localized(event, "ticket_instructions", lang),
        venue=i18n.localized(event, "venue", lang),
        address=event.address,
    )


def _uid(event_id: int, registration_id: int) -> str:
    host = urlsplit(settings.EVENT_PUBLIC_URL).hostname or "backbone-events"
    return f"event-{event_id}-registration-{registration_id}@{host}"


def uid_for(registration: Registration) -> str:
    return _uid(registration.event_id, registration.pk)


def _filename(name: str) -> str:
    return f"{slugify(name) or 'event'}.ics"


def filename_for(registration: Registration) -> str:
    return _filename(registration.event.name)


def _cancelled(state: str, kanban_state: str) -> bool:
    return state == RegistrationState.CANCEL or kanban_state == KanbanState.CANCEL


def is_cancelled(registration: Registration) -> bool:
    return _cancelled(registration.state, registration.event.kanban_state)


@lru_cache(maxsize=256)
def _vtimezone(tz_name: str, first_year: int, last_year: int) -> bytes:
    """The serialized VTIMEZONE of a zone over the years an event spans. Computing and
    serializing it is most of the cost of a calendar, and it depends on nothing else."""
    return icalendar.Timezone.from_tzinfo(
        zoneinfo.ZoneInfo(tz_name),
        tzid=tz_name,
        first_date=date(first_year, 1, 1),
        last_date=date(last_year, 12, 31),
    ).to_ical()


def _render(data: CalendarData) -> bytes:
    """The .ics body with the placeholder DTSTAMP (see `_stamped`)."""
    use_utc = data.tz_name == "UTC"
    zone = zoneinfo.ZoneInfo("UTC" if use_utc else data.tz_name)

    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("method", "PUBLISH")
    cal.add("calscale", "GREGORIAN")

    # Minted from the id and version in `data` (an unsaved instance: no query).
    holder = Registration(pk=data.registration_id, token_version=data.token_version)
    tickets_url = links.tickets_url(holder)
    vevent = icalendar.Event()
    vevent.add("uid", _uid(data.event_id, data.registration_id))
    vevent.add("dtstamp", _STAMP_PLACEHOLDER)
    vevent.add("dtstart", data.begin.astimezone(zone))
    vevent.add("dtend", data.end.astimezone(zone))
    vevent.add("sequence", data.sequence)
    vevent.add("summary", data.name)
    description = "\n\n".join(
        part
        for part in (data.instructions.strip(), data.tickets_label % {"url": tickets_url})
        if part
    )
    vevent.add("description", description)
    location = ", ".join(part for part in (data.venue, " ".join(data.address.split())) if part)
    if location:
        vevent.add("location", location)
    vevent.add("url", tickets_url)
    vevent.add("status", "CANCELLED" if _cancelled(data.state, data.kanban_state) else "CONFIRMED")
    cal.add_component(vevent)
    body = cal.to_ical()
    if body.count(_STAMP_LINE) != 1:
        raise RuntimeError("the calendar's DTSTAMP line was not rendered as expected")
    if use_utc:
        return body
    # The VTIMEZONE goes before the VEVENT, as icalendar itself would place it; it comes
    # from the per-zone cache already serialized (CRLF, folded).
    vtimezone = _vtimezone(
        data.tz_name, data.begin.astimezone(zone).year, data.end.astimezone(zone).year
    )
    head, vevent_marker, tail = body.partition(b"BEGIN:VEVENT\r\n")
    return head + vtimezone + vevent_marker + tail


def _stamped(rendered: bytes, now: datetime) -> bytes:
    """The body with DTSTAMP = now (UTC, whole seconds, as icalendar writes it)."""
    line = b"\r\nDTSTAMP:" + now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ").encode() + b"\r\n"
    return rendered.replace(_STAMP_LINE, line, 1)


def calendar(*, registration: Registration, now: datetime | None = None) -> bytes:
    """The .ics body for one registration (the caller checked the capability), rendered."""
    return _stamped(_render(calendar_data(registration)), now or timezone.now())


# --- the shared cache ---------------------------------------------------------------------------


def _module_sources() -> str:
    """The code a calendar depends on (this module, the link and token code): a deploy that
    changes any of it starts from fresh keys."""
    digest = hashlib.blake2b(digest_size=16)
    for module in (__file__, links.__file__, capability.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


_SOURCES = _module_sources()


@lru_cache(maxsize=8)
def _environment(public_url: str, secret: str, urlconf: str) -> bytes:
    """The key of the fingerprint: everything outside `CalendarData` that the file shows
    (links are built on EVENT_PUBLIC_URL and signed with the capability secret)."""
    parts = (
        _SOURCES,
        icalendar.__version__,
        PRODID,
        capability.FORMAT,
        reverse("my-tickets", kwargs={"token": "-"}, urlconf=urlconf),
        public_url,
        secret,
    )
    return hashlib.blake2b(repr(parts).encode(), digest_size=32).digest()


def cache_key(data: CalendarData) -> str:
    environment = _environment(
        settings.EVENT_PUBLIC_URL, settings.EVENT_CAPABILITY_SECRET, settings.ROOT_URLCONF
    )
    fingerprint = hashlib.blake2b(repr(data).encode(), key=environment, digest_size=20)
    return f"events:ics:{fingerprint.hexdigest()}"


# Django's RedisCache makes a new redis client object on every call (its ~70 µs is a quarter of
# a render): one client per connection pool instead (clients are thread-safe; the pool keeps
# the cache's timeouts and retry policy).
_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _redis(backend: RedisCache, *, write: bool) -> Any:
    cache_client: Any = backend._cache  # type: ignore[attr-defined]  # Django's RedisCacheClient
    pool = cache_client._get_connection_pool(write)
    client = _clients.get(pool)
    if client is None:
        client = _clients[pool] = cache_client.get_client(write=write)
    return client


class _LocalEntries:
    """A small LRU of files in this process, in front of the shared cache: a hit costs no round
    trip. Keys are content fingerprints, so an entry here is never stale either."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()  # gthread workers serve requests in threads

    def get(self, key: str) -> bytes | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: str, entry: bytes) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


LOCAL_ENTRIES = 1024  # × ~1.5–3 kB per file
_local = _LocalEntries(LOCAL_ENTRIES)


def _shared(key: str) -> bytes | None:
    backend = caches["default"]
    try:
        if isinstance(backend, RedisCache):
            return _redis(backend, write=False).get(backend.make_and_validate_key(key))
        return backend.get(key)
    except RedisError as error:
        logger.warning("ics: calendar cache unavailable (%s): rendering", type(error).__name__)
        return None


def _store(key: str, value: bytes) -> None:
    backend = caches["default"]
    try:
        if isinstance(backend, RedisCache):
            _redis(backend, write=True).set(
                backend.make_and_validate_key(key), value, ex=CACHE_SECONDS
            )
        else:
            backend.set(key, value, CACHE_SECONDS)
    except RedisError as error:
        logger.warning("ics: calendar cache unavailable (%s): not stored", type(error).__name__)


def _valid(entry: bytes) -> bool:
    """An entry is the file name, a line feed, then the body with the placeholder DTSTAMP."""
    return b"\n" in entry and _STAMP_LINE in entry


def calendar_file(*, registration: Registration, now: datetime | None = None) -> CalendarFile:
    """The file name and .ics body for one registration (the caller checked the capability):
    from this process's entries or the shared cache when this very calendar was rendered
    before, else rendered and stored in both, unless it is cancelled: a cancelled calendar is
    always rendered afresh and never stored."""
    now = now or timezone.now()
    data = calendar_data(registration)
    if _cancelled(data.state, data.kanban_state):
        return CalendarFile(_filename(data.name), _stamped(_render(data), now))
    key = cache_key(data)
    entry = _local.get(key)
    if entry is None:
        entry = _shared(key)
        if entry is None or not _valid(entry):
            # The slug is ASCII without line breaks: "<filename>\n<body>".
            entry = _filename(data.name).encode() + b"\n" + _render(data)
            _store(key, entry)
        _local.put(key, entry)
    filename, _newline, rendered = entry.partition(b"\n")
    return CalendarFile(filename.decode(), _stamped(rendered, now))
