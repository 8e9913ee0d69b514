"""Standard Webhooks verification of the sale seam (spec-overlay.md §1.1), by the
`standardwebhooks` library.

Invariants:
- `EVENT_SEAM_SECRET` holds one or more space-separated secrets (`whsec_<base64>`, or raw
  UTF-8 bytes without the prefix); a signature made with any one of them passes (rotation);
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
from standardwebhooks.webhooks import (
    EmptyWebhookSecretError,
    Webhook,
    WebhookVerificationError,
)

from events.errors import SecretMissing
from seams.errors import InvalidSignature, StaleTimestamp

SECRET_PREFIX = "whsec_"  # noqa: S105 — the format prefix, not a secret


@lru_cache(maxsize=4)
def _webhooks(setting: str) -> tuple[Webhook, ...]:
    hooks = []
    for secret in setting.split():
        try:
            # The library base64-decodes a str secret; a secret without the prefix is used as
            # its UTF-8 bytes (§1.1), which the library takes when given bytes.
            hooks.append(
                Webhook(secret if secret.startswith(SECRET_PREFIX) else secret.encode("utf-8"))
            )
        except (ValueError, EmptyWebhookSecretError) as exc:  # bad base64, empty secret
            raise SecretMissing(
                "EVENT_SEAM_SECRET holds a secret that cannot be used.", reason=type(exc).__name__
            ) from exc
    return tuple(hooks)


def webhooks() -> tuple[Webhook, ...]:
    setting = getattr(settings, "EVENT_SEAM_SECRET", "") or ""
    hooks = _webhooks(setting)
    if not hooks:
        raise SecretMissing("The sale seam has no secret (EVENT_SEAM_SECRET).")
    return hooks


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
