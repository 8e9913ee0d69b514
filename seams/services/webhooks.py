"""Outbound webhooks (docs/spec.md "Outbound webhooks"): the endpoints staff configure, and the
delivery of the messages the audit-log trigger queued (seams migration 0007).

Invariants:
- a message is written in the transaction of its change, or not at all (the trigger); this
  module only delivers, and never writes a message;
- each POST is signed with the `standardwebhooks` library (`webhook-id` is the message's id,
  the same on every attempt and endpoint; `webhook-timestamp` the attempt's time); after a
  rotation the previous secret adds a second signature until `previous_secret_until`;
- pending deliveries are claimed `FOR UPDATE SKIP LOCKED` and POSTed (CONCURRENT at a time
  per endpoint, on sender threads; the database is only touched by the caller) in the claiming
  transaction: two deliverers never POST the same delivery, and a deliverer killed in the middle
  (its transaction rolls back) leaves its deliveries pending for the next run: at least once;
- per endpoint, a subject's messages go out in version order: a delivery is not claimed while
  an earlier version of its subject is pending for the same endpoint;
- 2xx: delivered. 408/425/429, 5xx, a timeout or a refused connection: pending again after an
  exponential backoff (30 s doubling, capped at one hour, longer when the answer's Retry-After
  asks), and the endpoint's deliveries not yet sent wait for the next run. Another 4xx:
  `failed` (staff may send it again). Every POST leaves a `WebhookAttempt`;
- an endpoint with no success for EVENT_WEBHOOK_DISABLE_HOURS is disabled (audited, an alert on
  the dashboard); its deliveries keep queueing and wait until staff enable it again. A success
  after failures brings the endpoint's waiting deliveries forward: a receiver that comes back
  receives its backlog at once, in order.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import ssl
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import certifi
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from events.errors import InvalidTransition, NotFound, ValidationFailed
from events.services import audit, nudge
from events.services.delivery import backoff
from seams.models import (
    WEBHOOK_TYPES,
    DeliveryState,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("seams.webhooks")

DELIVERY_TASK = "seams.deliver_webhooks"
NUDGE_KEY = "seams:nudge:webhooks"
# The audit verbs the trigger turns into messages (event.updated only when the dates moved).
SOURCE_VERBS = frozenset(WEBHOOK_TYPES) - {"event.postponed"} | {"event.updated"}

# Seconds: the whole exchange, and the connection. httpx is imported by the functions that use
# it: it costs every process that loads the app (web, workers, commands) a sixth of a second.
TIMEOUT_SECONDS = (10.0, 5.0)
RETRYABLE_STATUSES = frozenset({408, 425, 429})
RESPONSE_EXCERPT = 1000
BATCH = 200
# POSTs in flight at once to one endpoint (each its own kept-alive connection).
CONCURRENT = 8
RUN_LIMIT = 5000
MAX_RETRY_AFTER = timedelta(hours=24)
URL_MAX = 2000
USER_AGENT = "backbone-events-webhooks"


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


# --- endpoints: the staff verbs ---------------------------------------------------------------


def _check_url(url: str) -> str:
    """An http(s) URL with a host that the HTTP client can send to: no space or control
    character (urlsplit drops some silently), no user:password part (it would stand in the
    audit log and the lists), a host the client can encode."""
    url = (url or "").strip()
    refused = ValidationFailed(
        "The endpoint URL must be an http:// or https:// URL with a host, without spaces, "
        "control characters or a user:password part.",
        code="invalid_value",
        field="url",
    )
    if len(url) > URL_MAX or any(c.isspace() or not c.isprintable() for c in url):
        raise refused
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise refused
    import httpx

    try:
        httpx.URL(url).raw_host  # noqa: B018 — encodes the host (IDNA) as a POST would
    except Exception:  # httpx.InvalidURL, idna's errors: not all of them HTTPError
        raise refused from None
    return url


def _check_types(event_types: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(event_types))
    unknown = sorted(set(chosen) - set(WEBHOOK_TYPES))
    if unknown or not chosen:
        raise ValidationFailed(
            f"Choose message types among {', '.join(WEBHOOK_TYPES)}"
            + (f" (unknown: {', '.join(unknown)})." if unknown else "."),
            code="invalid_value",
            field="event_types",
        )
    return [t for t in WEBHOOK_TYPES if t in chosen]


def create_endpoint(
    *,
    name: str,
    url: str,
    actor: Any,
    event: Any = None,
    event_types: Iterable[str] = WEBHOOK_TYPES,
    secret: str | None = None,
) -> WebhookEndpoint:
    """A new endpoint with a fresh secret (or `secret`, a whsec_ value the host already holds)."""
    endpoint = WebhookEndpoint(
        name=(name or "").strip()[:120] or urlsplit(url).hostname or "endpoint",
        url=_check_url(url),
        event=event,
        event_types=_check_types(event_types),
        secret=_check_secret(secret) if secret else new_secret(),
    )
    with transaction.atomic():
        endpoint.save(force_insert=True)
        _audit(endpoint, actor, "webhook_endpoint.created", {"url": endpoint.url})
    return endpoint


def _check_secret(secret: str) -> str:
    try:
        Webhook(secret)
    except Exception:  # the library raises bare errors on bad base64
        raise ValidationFailed(
            "A secret is whsec_ followed by base64.", code="invalid_value", field="secret"
        ) from None
    return secret


def update_endpoint(*, endpoint: WebhookEndpoint, actor: Any, **fields: Any) -> WebhookEndpoint:
    """Change the name, URL, event or message types (the secret has its own verb)."""
    allowed = {"name", "url", "event", "event_types"}
    unknown = set(fields) - allowed
    if unknown:
        raise ValidationFailed(f"Unknown fields: {sorted(unknown)}", code="invalid_value")
    if "url" in fields:
        fields["url"] = _check_url(fields["url"])
    if "event_types" in fields:
        fields["event_types"] = _check_types(fields["event_types"])
    with transaction.atomic():
        row = _locked(endpoint)
        changes = {}
        for name, value in fields.items():
            current = getattr(row, name)
            if current != value:
                changes[name] = [_plain(current), _plain(value)]
                setattr(row, name, value)
        if changes:
            row.save()
            _audit(row, actor, "webhook_endpoint.updated", changes)
    return row


def _plain(value: Any) -> Any:
    return value.pk if hasattr(value, "pk") else value


def delete_endpoint(*, endpoint: WebhookEndpoint, actor: Any) -> None:
    """Delete an endpoint and its deliveries (their messages stay for the other endpoints)."""
    with transaction.atomic():
        row = _locked(endpoint, key=True)
        _audit(row, actor, "webhook_endpoint.deleted", {"url": row.url, "name": row.name})
        row.delete()


def rotate_secret(*, endpoint: WebhookEndpoint, actor: Any) -> WebhookEndpoint:
    """A new secret signs from now on; the current one keeps signing beside it for
    EVENT_WEBHOOK_ROTATION_HOURS, so the host switches without refusing a message."""
    with transaction.atomic():
        row = _locked(endpoint)
        row.previous_secret = row.secret
        row.previous_secret_until = timezone.now() + timedelta(
            hours=settings.EVENT_WEBHOOK_ROTATION_HOURS
        )
        row.secret = new_secret()
        row.save(update_fields=["secret", "previous_secret", "previous_secret_until", "updated_at"])
        _audit(
            row,
            actor,
            "webhook_endpoint.secret_rotated",
            {"previous_until": row.previous_secret_until.isoformat()},
        )
    return row


def set_enabled(*, endpoint: WebhookEndpoint, enabled: bool, actor: Any) -> WebhookEndpoint:
    """Enable (its waiting deliveries go out now, in order) or disable an endpoint."""
    with transaction.atomic():
        row = _locked(endpoint)
        if row.enabled == enabled:
            return row
        row.enabled = enabled
        if enabled:
            row.disabled_at, row.disabled_reason = None, ""
            row.failing_since, row.consecutive_failures = None, 0
            WebhookDelivery.objects.filter(
                endpoint=row, state=DeliveryState.PENDING, next_attempt_at__gt=timezone.now()
            ).update(next_attempt_at=timezone.now())
            nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
        else:
            row.disabled_at, row.disabled_reason = timezone.now(), "Disabled by staff."
        row.save()
        _audit(
            row, actor, "webhook_endpoint.enabled" if enabled else "webhook_endpoint.disabled", {}
        )
    return row


def send_again(*, delivery: WebhookDelivery, actor: Any) -> WebhookDelivery:
    """Queue a delivery again, due now, whatever its state (a receiver that lost a delivered
    message asks for it again): the same message, the same `webhook-id`."""
    with transaction.atomic():
        try:
            row = (
                WebhookDelivery.objects.select_for_update(nowait=True)
                .filter(pk=delivery.pk)
                .first()
            )
        except OperationalError:  # claimed by a delivery run right now
            raise InvalidTransition(
                "This delivery is being sent right now; try again in a moment.",
                delivery=delivery.pk,
            ) from None
        if row is None:
            raise NotFound(f"Delivery {delivery.pk} does not exist.", delivery=delivery.pk)
        before = row.state
        row.state = DeliveryState.PENDING
        row.next_attempt_at = timezone.now()
        row.delivered_at = None
        row.save(update_fields=["state", "next_attempt_at", "delivered_at"])
        audit.record(
            actor=actor,
            verb="webhook_delivery.requeued",
            event=row.message.event_id,
            data={"delivery": row.pk, "message": row.message.msg_id, "state": [before, row.state]},
        )
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
    return row


def _locked(endpoint: WebhookEndpoint, *, key: bool = False) -> WebhookEndpoint:
    """The endpoint's row locked for a staff verb: FOR NO KEY UPDATE (bookings queueing a
    delivery to it take KEY SHARE and go on), FOR UPDATE to delete it (`key`)."""
    rows = WebhookEndpoint.objects.select_for_update(no_key=not key)
    row = rows.filter(pk=endpoint.pk).first()
    if row is None:
        raise NotFound(f"Webhook endpoint {endpoint.pk} does not exist.", endpoint=endpoint.pk)
    return row


def _audit(endpoint: WebhookEndpoint, actor: Any, verb: str, data: dict[str, Any]) -> None:
    audit.record(
        actor=actor, verb=verb, event=endpoint.event_id, data={"endpoint": endpoint.pk, **data}
    )


# --- delivery -------------------------------------------------------------------------------


@dataclass
class WebhookReport:
    delivered: int = 0
    retried: int = 0
    failed: int = 0
    disabled: list[int] = field(default_factory=list)
    work_remaining: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "retried": self.retried,
            "failed": self.failed,
            "disabled": self.disabled,
            "work_remaining": self.work_remaining,
        }


# The claim: due pending deliveries of enabled endpoints that did not fail in this run, whose
# subject has no earlier version pending for the same endpoint, oldest due first.
_CLAIM = """
SELECT d.id FROM seams_webhookdelivery d
  JOIN seams_webhookendpoint e ON e.id = d.endpoint_id AND e.enabled
 WHERE d.state = 'pending' AND d.next_attempt_at <= %s AND d.endpoint_id <> ALL (%s::bigint[])
   AND NOT EXISTS (
       SELECT 1 FROM seams_webhookdelivery p
        WHERE p.endpoint_id = d.endpoint_id AND p.subject = d.subject
          AND p.version < d.version AND p.state = 'pending')
 ORDER BY d.next_attempt_at, d.id
 LIMIT %s
   FOR UPDATE OF d SKIP LOCKED
"""


@cache
def _tls() -> ssl.SSLContext:
    """The TLS context of every run, made once: httpx builds a new one per client otherwise,
    loading the CA bundle each time (about 30 ms, more than a batch of local POSTs)."""
    return ssl.create_default_context(cafile=certifi.where())


def deliver_due(*, now: datetime | None = None, limit: int = RUN_LIMIT) -> WebhookReport:
    """POST the due deliveries, BATCH per transaction, at most `limit`, until none is due. An
    endpoint that fails is not tried again in the same run (its deliveries wait for their
    backoff). When the limit stopped the run, delivery is nudged again after commit."""
    import httpx

    report = WebhookReport()
    budget = limit
    failing: set[int] = set()
    total, connect = TIMEOUT_SECONDS
    with (
        httpx.Client(
            timeout=httpx.Timeout(total, connect=connect),
            headers={"User-Agent": USER_AGENT},
            verify=_tls(),
            limits=httpx.Limits(max_connections=CONCURRENT, max_keepalive_connections=CONCURRENT),
        ) as client,
        ThreadPoolExecutor(max_workers=CONCURRENT, thread_name_prefix="webhook") as pool,
    ):
        while budget > 0:
            size = min(BATCH, budget)
            at = now or timezone.now()
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(_CLAIM, [at, sorted(failing), size])
                    ids = [row[0] for row in cursor.fetchall()]
                if not ids:
                    return report
                budget -= len(ids)
                rows = list(
                    WebhookDelivery.objects.filter(pk__in=ids)
                    .select_related("message", "endpoint")
                    .order_by("next_attempt_at", "pk")
                )
                _post_batch(client, pool, rows, at, report, failing)
    report.work_remaining = True
    nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
    return report


def signature_header(endpoint: WebhookEndpoint, msg_id: str, at: datetime, body: str) -> str:
    """The `webhook-signature` value: the current secret's signature, and the previous
    secret's while its rotation overlap lasts."""
    keys = [endpoint.secret]
    if endpoint.previous_secret and (endpoint.previous_secret_until or at) > at:
        keys.append(endpoint.previous_secret)
    return " ".join(Webhook(key).sign(msg_id, at, body) for key in keys)


def body_of(delivery: WebhookDelivery) -> str:
    """The POST's body: the message's payload as compact JSON (the same text on every
    attempt)."""
    return json.dumps(delivery.message.payload, ensure_ascii=False, separators=(",", ":"))


@dataclass
class _Answer:
    """One POST's outcome, made on a sender thread (no database there)."""

    row: WebhookDelivery
    sent_at: datetime
    status: int | None
    excerpt: str
    error: str
    retry_after: timedelta | None
    elapsed_ms: int
    refused: bool = False  # no answer, and none will come (an address it cannot send to)


def _post(client: httpx.Client, row: WebhookDelivery) -> _Answer:
    import httpx

    endpoint = row.endpoint
    sent_at = timezone.now()
    body = body_of(row)
    headers = {
        "content-type": "application/json",
        "webhook-id": row.message.msg_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": signature_header(endpoint, row.message.msg_id, sent_at, body),
    }
    started = time.monotonic()
    status: int | None = None
    excerpt = error = ""
    retry_after: timedelta | None = None
    refused = False
    try:
        with client.stream("POST", endpoint.url, content=body.encode(), headers=headers) as r:
            status = r.status_code
            retry_after = _retry_after(r)
            kept = b""
            for chunk in r.iter_bytes():  # the excerpt only: a receiver's body is not ours
                kept += chunk
                if len(kept) >= RESPONSE_EXCERPT:
                    break
            excerpt = kept[:RESPONSE_EXCERPT].decode("utf-8", "replace")
    except httpx.TransportError as exc:  # timeouts, refused / reset connections
        error = f"{type(exc).__name__}: {exc}"[:2000]
        status = None
    except Exception as exc:  # a URL the client cannot send to: retrying cannot help
        error = f"{type(exc).__name__}: {exc}"[:2000]
        status, refused = None, True
    elapsed = int((time.monotonic() - started) * 1000)
    return _Answer(row, sent_at, status, excerpt, error, retry_after, elapsed, refused)


def _post_batch(
    client: httpx.Client,
    pool: ThreadPoolExecutor,
    rows: Sequence[WebhookDelivery],
    now: datetime,
    report: WebhookReport,
    waiting: set[int],
) -> None:
    """POST the rows and record their outcomes; `waiting`: the endpoints that failed in this
    run (their other rows are not tried), grown by this batch's.

    An endpoint's rows go out CONCURRENT at a time: the claim never holds two versions of one
    subject for one endpoint, so rows sent together never need an order between them. After a
    wave with a failure that says "later", the endpoint's remaining rows wait."""
    attempts: list[WebhookAttempt] = []
    outcome: dict[int, set[str]] = {}  # endpoint id → "success", "later", "refused"
    touched: list[WebhookDelivery] = []
    by_endpoint: dict[int, list[WebhookDelivery]] = {}
    for row in rows:
        by_endpoint.setdefault(row.endpoint_id, []).append(row)
    for endpoint_id, endpoint_rows in by_endpoint.items():
        for start in range(0, len(endpoint_rows), CONCURRENT):
            if endpoint_id in waiting:
                break
            wave = endpoint_rows[start : start + CONCURRENT]
            for answer in pool.map(lambda row: _post(client, row), wave):
                attempts.append(
                    WebhookAttempt(
                        delivery=answer.row,
                        at=answer.sent_at,
                        status=answer.status,
                        error=answer.error,
                        response=answer.excerpt,
                        duration_ms=answer.elapsed_ms,
                    )
                )
                touched.append(answer.row)
                _outcome(answer, now, report, waiting, outcome)
    WebhookAttempt.objects.bulk_create(attempts)
    _record(touched)
    _endpoint_health(outcome, now, report)


def _outcome(
    answer: _Answer,
    now: datetime,
    report: WebhookReport,
    waiting: set[int],
    outcome: dict[int, set[str]],
) -> None:
    """Set the delivery's state from its answer (2xx delivered; later: backoff; else failed)."""
    row, status = answer.row, answer.status
    endpoint = row.endpoint
    row.attempts += 1
    row.last_status = status
    if status is not None and 200 <= status < 300:
        row.state = DeliveryState.DELIVERED
        row.delivered_at = timezone.now()
        row.last_error = ""
        outcome.setdefault(endpoint.pk, set()).add("success")
        report.delivered += 1
    elif not answer.refused and (status is None or status >= 500 or status in RETRYABLE_STATUSES):
        row.last_error = answer.error or f"HTTP {status}: {answer.excerpt}"[:2000]
        row.next_attempt_at = now + max(backoff(row.attempts), answer.retry_after or timedelta())
        outcome.setdefault(endpoint.pk, set()).add("later")
        waiting.add(endpoint.pk)
        report.retried += 1
        logger.warning(
            "webhook %s to endpoint %s retried at %s (attempt %s): %s",
            row.message.msg_id,
            endpoint.pk,
            row.next_attempt_at.isoformat(),
            row.attempts,
            row.last_error[:200],
        )
    else:
        row.state = DeliveryState.FAILED
        row.last_error = answer.error or f"HTTP {status}: {answer.excerpt}"[:2000]
        outcome.setdefault(endpoint.pk, set()).add("refused")
        report.failed += 1
        audit.record(
            actor=audit.SYSTEM,
            verb="webhook_delivery.failed",
            event=row.message.event_id,
            data={
                "delivery": row.pk,
                "message": row.message.msg_id,
                "endpoint": endpoint.pk,
                "status": status,
            },
        )
        logger.error(
            "webhook %s refused by endpoint %s: HTTP %s", row.message.msg_id, endpoint.pk, status
        )


# The outcomes of a batch in one statement (Django's bulk_update builds a CASE per column and
# row, which cost more than the POSTs themselves: bench B9).
_RECORD = """
UPDATE seams_webhookdelivery AS d
   SET state = u.state, attempts = u.attempts, next_attempt_at = u.next_attempt_at,
       last_status = u.last_status, last_error = u.last_error, delivered_at = u.delivered_at
  FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::timestamptz[], %s::int[], %s::text[],
              %s::timestamptz[])
       AS u (id, state, attempts, next_attempt_at, last_status, last_error, delivered_at)
 WHERE d.id = u.id
"""


def _record(rows: Sequence[WebhookDelivery]) -> None:
    if not rows:
        return
    columns = ("pk", "state", "attempts", "next_attempt_at", "last_status", "last_error")
    values = [[getattr(row, name) for row in rows] for name in columns]
    values.append([row.delivered_at for row in rows])
    with connection.cursor() as cursor:
        cursor.execute(_RECORD, values)


def _retry_after(response: httpx.Response) -> timedelta | None:
    """The answer's Retry-After in whole seconds (a date form is ignored), capped at a day."""
    raw = (response.headers.get("retry-after") or "").strip()
    if raw.isascii() and raw.isdigit():
        return min(timedelta(seconds=int(raw)), MAX_RETRY_AFTER)
    return None


def _endpoint_health(outcome: dict[int, set[str]], now: datetime, report: WebhookReport) -> None:
    """Record each endpoint's run: a success resets its failure run and, when nothing of this
    batch asked to wait, brings its waiting deliveries forward; a failure run longer than
    EVENT_WEBHOOK_DISABLE_HOURS disables it.

    The endpoint rows are locked FOR NO KEY UPDATE (a booking's trigger only takes KEY SHARE on
    them), skipping one a staff verb holds: its health waits for the next batch rather than
    this batch waiting on it (a delete waits on the claimed deliveries: no deadlock)."""
    if not outcome:
        return
    limit = timedelta(hours=settings.EVENT_WEBHOOK_DISABLE_HOURS)
    locked = WebhookEndpoint.objects.select_for_update(no_key=True, skip_locked=True)
    for endpoint in locked.filter(pk__in=sorted(outcome)).order_by("pk"):
        seen = outcome[endpoint.pk]
        if "success" in seen:
            recovered = endpoint.consecutive_failures > 0
            endpoint.consecutive_failures = 0
            endpoint.failing_since = None
            endpoint.last_success_at = timezone.now()
            if recovered and "later" not in seen:
                WebhookDelivery.objects.filter(
                    endpoint=endpoint, state=DeliveryState.PENDING, next_attempt_at__gt=now
                ).update(next_attempt_at=now)
        else:
            endpoint.consecutive_failures += 1
            endpoint.failing_since = endpoint.failing_since or now
            if endpoint.enabled and endpoint.failing_since <= now - limit:
                endpoint.enabled = False
                endpoint.disabled_at = now
                endpoint.disabled_reason = (
                    f"No success for {settings.EVENT_WEBHOOK_DISABLE_HOURS} h "
                    f"({endpoint.consecutive_failures} failed attempts)."
                )
                report.disabled.append(endpoint.pk)
                _audit(
                    endpoint,
                    audit.SYSTEM,
                    "webhook_endpoint.disabled",
                    {"reason": endpoint.disabled_reason},
                )
                logger.error(
                    "webhook endpoint %s disabled: %s", endpoint.pk, endpoint.disabled_reason
                )
        endpoint.save(
            update_fields=[
                "consecutive_failures",
                "failing_since",
                "last_success_at",
                "enabled",
                "disabled_at",
                "disabled_reason",
            ]
        )


# --- after-commit hooks (registered in SeamsConfig.ready) -----------------------------------


# A process nudges delivery at most once per NUDGE_EVERY seconds from its bookings and
# transitions: under a rush each would otherwise pay a Redis round trip (about a third of a
# millisecond, bench B9) to learn that a nudge is already pending. A message committed within
# that second of a delivery run ending waits for the next nudge, or for beat (30 s).
NUDGE_EVERY = 1.0
_last_nudge = [float("-inf")]


def registrations_changed(
    registrations: Any = None, actor: Any = None, signals: frozenset[str] = frozenset()
) -> None:
    """The booking's and the transitions' hook: nudge delivery when the trigger queued one."""
    if "webhooks" not in signals:
        return
    at = time.monotonic()
    if at - _last_nudge[0] < NUDGE_EVERY:
        return
    _last_nudge[0] = at
    nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)


def audit_written(verbs: frozenset[str]) -> None:
    """The audit helper's hook: nudge delivery after a change a message may have been made of
    (the delivery run finds nothing when no endpoint wanted it)."""
    if verbs & SOURCE_VERBS:
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
