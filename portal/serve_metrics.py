"""What `/serve/` measures of each service's answers, in Redis so that every portal process adds to the
same figures: the time to first token (from the request reaching the portal to the first byte of the
answer's body: the first token of a stream, the whole answer otherwise; cold starts and the portal's
queue included, since the caller waited for them), the last TTFT_KEPT of each service."""

from __future__ import annotations

import logging

import redis

from portal.serve_limits import redis_client

log = logging.getLogger(__name__)

TTFT_KEPT = 1000
TTFT_KEPT_S = 7 * 24 * 3600


def _ttft_key(job_id: int) -> str:
    return f"serve:ttft:{job_id}"


def record_ttft(job_id: int, seconds: float) -> None:
    """One answer's time to first token."""
    try:
        pipe = redis_client().pipeline(transaction=False)
        pipe.lpush(_ttft_key(job_id), f"{seconds:.4f}")
        pipe.ltrim(_ttft_key(job_id), 0, TTFT_KEPT - 1)
        pipe.expire(_ttft_key(job_id), TTFT_KEPT_S)
        pipe.execute()
    except redis.RedisError as error:
        log.info("a time to first token was not kept: %s", error)


def recent_ttfts(job_id: int) -> list[float]:
    """The service's last times to first token, in seconds, newest first ([] when none or Redis is down)."""
    try:
        return [float(v) for v in redis_client().lrange(_ttft_key(job_id), 0, TTFT_KEPT - 1)]
    except redis.RedisError:
        return []


def ttft_quantiles(job_id: int) -> tuple[float | None, float | None]:
    """(p50, p95) of the service's recent times to first token, in seconds (None when none)."""
    values = sorted(recent_ttfts(job_id))
    if not values:
        return None, None

    def pick(q: int) -> float:
        return values[max(0, -(-len(values) * q // 100) - 1)]

    return pick(50), pick(95)
