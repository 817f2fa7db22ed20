"""A fixed-window rate limiter on Django's cache (Redis): sign-in, API, agent and /serve/ requests,
each counted by who is asking (a token's digest, a user id, else the client's address).

Fails open: when the cache is unreachable nothing is limited, so a Redis outage never turns
into refused logins or API calls.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import time
from functools import lru_cache

from django.conf import settings
from django.core.cache import cache

from billing.models import hash_token
from portal.credentials import presented

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


@lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs if cidr.strip())


def _trusted(address, networks) -> bool:
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks if network.version == address.version)


def _address(text: str):
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def client_address(request) -> str:
    """The client's address: the direct peer, unless it is one of settings.TRUSTED_PROXIES; then the
    right-most address in X-Forwarded-For that is not a trusted proxy (what the outermost trusted proxy
    saw; anything left of it the client wrote itself). A garbled entry ends the walk at the hop before it."""
    peer = request.META.get("REMOTE_ADDR", "")
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    hop = _address(peer)
    if not networks or hop is None or not _trusted(hop, networks):
        return peer
    for entry in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _address(entry)
        if address is None:
            break
        hop = address
        if not _trusted(address, networks):
            break
    return str(hop)


def token_identity(meta) -> str | None:
    """The rate-limit identity of the token a request presents (its digest, as stored), "malformed"
    for a token header authentication refuses as such, None when it presents none."""
    found = presented(meta)
    if found is None:
        return None
    if found.malformed:
        return "malformed"
    return "token:" + hash_token(found.token)
