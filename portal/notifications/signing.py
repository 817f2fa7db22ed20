"""Webhook signatures: `X-GPU-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with the
webhook's secret>`. A receiver computes the same over the bytes it got and compares in constant time."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-GPU-Signature"
EVENT_HEADER = "X-GPU-Event"
DELIVERY_HEADER = "X-GPU-Delivery"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """True when `header` is the signature of `body` with `secret` (what a receiver checks)."""
    return bool(header) and hmac.compare_digest(signature(secret, body), header.strip())
