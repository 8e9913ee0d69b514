"""Standard Webhooks verification of the sale seam (spec-overlay.md §1.1), by the
`standardwebhooks` library.

Invariants:
- `EVENT_SEAM_SECRET` holds one or more space-separated secrets (`whsec_<base64>`, or raw
  UTF-8 bytes without the prefix), parsed by `events.secret_knobs.seam_keys`, the rule the
  start-up check applies too; a signature made with any one of them passes (rotation);
- checks in the contract's order: missing secret (503 `secret_missing`), missing headers or no
  matching signature (401 `invalid_signature`), timestamp more than 300 s away (401
  `stale_timestamp`). The library checks the timestamp before the signature, so the signature
  is matched first with the library's own `Webhook.sign`, and the library's `verify` then runs
  on the matching signature alone: whatever it still refuses is the timestamp.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

from django.conf import settings
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from events import secret_knobs
from events.errors import SecretMissing
from seams.errors import InvalidSignature, StaleTimestamp


@lru_cache(maxsize=4)
def _webhooks(setting: str) -> tuple[Webhook, ...]:
    # The start-up check parses with the same rule (events.secret_knobs, events.E002/E003), so
    # a server that started never refuses here unless its settings changed since.
    try:
        keys = secret_knobs.seam_keys(setting)
    except secret_knobs.SecretProblem:
        # The host is told the seam has no usable secret; which entry is wrong is the
        # operator's to read (manage.py check), not the caller's.
        raise SecretMissing("The sale seam has no usable secret (EVENT_SEAM_SECRET).") from None
    # Bytes: the library uses them as the key as they are (a str would be base64-decoded
    # again by its own, lenient decoder).
    return tuple(Webhook(key) for key in keys)


def webhooks() -> tuple[Webhook, ...]:
    return _webhooks(getattr(settings, "EVENT_SEAM_SECRET", "") or "")


def verify(*, headers: Mapping[str, str], body: bytes) -> tuple[str, datetime]:
    """Return (message id, timestamp) of a correctly signed, fresh message, or raise."""
    hooks = webhooks()
    lowered = {str(k).lower(): v for k, v in headers.items()}
    msg_id = lowered.get("webhook-id") or ""
    raw_ts = lowered.get("webhook-timestamp") or ""
    raw_sig = lowered.get("webhook-signature") or ""
    if not (msg_id and raw_ts and raw_sig):
        raise InvalidSignature("webhook-id, webhook-timestamp and webhook-signature are required.")
    try:
        # As the library reads it (it signs the whole seconds of this value).
        timestamp = datetime.fromtimestamp(float(raw_ts), tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise InvalidSignature("webhook-timestamp is not a unix time.") from None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # The library signs and verifies text; a body that is not UTF-8 cannot be verified by
        # it (and could never be JSON). Documented in docs/integrators.md.
        raise InvalidSignature("The body is not UTF-8 text.") from None
    offered = [token.encode("utf-8", "surrogatepass") for token in raw_sig.split(" ") if token]
    for hook in hooks:
        expected = hook.sign(msg_id=msg_id, timestamp=timestamp, data=text).encode()
        for token in offered:
            if hmac.compare_digest(expected, token):
                try:
                    hook.verify(
                        text,
                        {
                            "webhook-id": msg_id,
                            "webhook-timestamp": raw_ts,
                            "webhook-signature": token.decode(),
                        },
                        json_parse=False,
                    )
                except WebhookVerificationError:
                    raise StaleTimestamp(
                        "webhook-timestamp is more than 300 s away from our clock."
                    ) from None
                return msg_id, timestamp
    raise InvalidSignature("No signature matches.")
