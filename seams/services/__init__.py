"""The sale seam's verbs (interfaces.md): `receive`, `apply`, `replay`."""

from seams.services.apply import apply
from seams.services.receive import SeamResult, receive
from seams.services.replay import replay

__all__ = ["SeamResult", "apply", "receive", "replay"]
