"""A fixed-window rate limiter on Django's cache (Redis): login, API-token and agent requests.

Fails open: when the cache is unreachable nothing is limited, so a Redis outage never turns
into refused logins or API calls.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time

from django.core.cache import cache

log = logging.getLogger(__name__)


def parse_rate(rate: str) -> tuple[int, int]:
    """"20/60" -> (20 requests, 60 s)."""
    count, _, seconds = rate.partition("/")
    return int(count), int(seconds or 60)


def hit(scope: str, ident: str, rate: str) -> int | None:
    """Count one request; the seconds to wait (for Retry-After) when over the limit, else None."""
    limit, window = parse_rate(rate)
    now = time.time()
    bucket = int(now // window)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:24]  # never a token in a cache key
    key = f"ratelimit:{scope}:{digest}:{bucket}"
    try:
        cache.add(key, 0, timeout=window + 1)
        count = cache.incr(key)
    except Exception as exc:  # the cache backend's own errors (redis-py's, socket errors)
        log.warning("rate limiting off: cache unreachable (%s)", exc)
        return None
    if count <= limit:
        return None
    return max(1, math.ceil((bucket + 1) * window - now))
