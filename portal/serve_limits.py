"""Limits of `/serve/`, counted in Redis so that every portal process agrees.

Rates: requests and tokens (prompt + completion, from each answer's usage) per minute, for the service
as a whole (ServiceScale.requests_per_minute / tokens_per_minute: its spec's `limits`, or its page or the
API) and for the service key that calls (ServiceKey's own, lower, limits). Fixed one-minute windows: a
request is refused (429, Retry-After: the seconds left in the minute) when a scope has used its requests
this minute, or its tokens; tokens are added when an answer ends, so one answer may go over by itself.

The queue: a service at its max replicas sends each running replica at most SERVE_REPLICA_CONCURRENCY
requests at once; the rest wait in the portal, up to SERVE_QUEUE_MAX, and are let through fairly across
callers (each caller's n-th waiting request before anyone's n+1-th: start-time fair queueing, a waiting
request's place is max(the last let through, its caller's previous place) + 1). A full queue answers 429.

Redis unreachable: nothing is limited or queued (fails open, as portal.ratelimit does).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
import uuid
from dataclasses import dataclass

import redis
from asgiref.sync import sync_to_async
from django.conf import settings

log = logging.getLogger(__name__)

WINDOW_S = 60
POLL_S = 0.05
PREFIX = "serve"

_client: tuple[int, redis.Redis] | None = None


def redis_client() -> redis.Redis:
    """This process's Redis client (the project's REDIS_URL)."""
    global _client
    if _client is None or _client[0] != os.getpid():  # a forked worker needs its own connections
        _client = (os.getpid(), redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1))
    return _client[1]


@dataclass(frozen=True)
class Scope:
    """What one limit counts: the service (`service`) or one key (`key`), by id."""

    name: str            # "service" or "key": the error's words
    ident: str
    requests_per_minute: int | None
    tokens_per_minute: int | None


@dataclass(frozen=True)
class OverLimit:
    scope: Scope
    what: str            # "requests" or "tokens"
    limit: int
    retry_after_s: int


# Every scope under its limits: count the request in each; else the first scope over one, counting nothing.
_CHECK = """
local n = #KEYS / 2
for i = 1, n do
  local rpm = tonumber(ARGV[2 * i])
  local tpm = tonumber(ARGV[2 * i + 1])
  if rpm > 0 and tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0') >= rpm then return {i, 1} end
  if tpm > 0 and tonumber(redis.call('GET', KEYS[2 * i]) or '0') >= tpm then return {i, 2} end
end
for i = 1, n do
  redis.call('INCR', KEYS[2 * i - 1])
  redis.call('EXPIRE', KEYS[2 * i - 1], ARGV[1])
end
return {0, 0}
"""


def _window(now: float) -> tuple[int, int]:
    """(this minute's number, seconds left in it)."""
    bucket = int(now // WINDOW_S)
    return bucket, max(1, math.ceil((bucket + 1) * WINDOW_S - now))


def _keys(scope: Scope, bucket: int) -> tuple[str, str]:
    return f"{PREFIX}:rpm:{scope.ident}:{bucket}", f"{PREFIX}:tpm:{scope.ident}:{bucket}"


def admit(scopes: list[Scope], now: float | None = None) -> OverLimit | None:
    """Count one request against every scope with a limit; the limit it is over (counting nothing), else None."""
    limited = [s for s in scopes if s.requests_per_minute or s.tokens_per_minute]
    if not limited:
        return None
    bucket, left = _window(time.time() if now is None else now)
    keys, args = [], [WINDOW_S + 1]
    for scope in limited:
        keys += _keys(scope, bucket)
        args += [scope.requests_per_minute or 0, scope.tokens_per_minute or 0]
    try:
        index, which = redis_client().eval(_CHECK, len(keys), *keys, *args)
    except redis.RedisError as error:
        log.warning("/serve/ limits off: Redis unreachable (%s)", error)
        return None
    if not index:
        return None
    scope = limited[int(index) - 1]
    if int(which) == 1:
        return OverLimit(scope, "requests", scope.requests_per_minute or 0, left)
    return OverLimit(scope, "tokens", scope.tokens_per_minute or 0, left)


def add_tokens(scopes: list[Scope], tokens: int, now: float | None = None) -> None:
    """An answer's tokens, counted in this minute of every scope that limits tokens."""
    limited = [s for s in scopes if s.tokens_per_minute]
    if tokens <= 0 or not limited:
        return
    bucket, _ = _window(time.time() if now is None else now)
    try:
        pipe = redis_client().pipeline(transaction=False)
        for scope in limited:
            key = _keys(scope, bucket)[1]
            pipe.incrby(key, tokens)
            pipe.expire(key, WINDOW_S + 1)
        pipe.execute()
    except redis.RedisError as error:
        log.warning("/serve/ token counts lost: Redis unreachable (%s)", error)


# --------------------------------------------------------------------------- the queue at max replicas


class QueueFull(Exception):
    def __init__(self, waiting: int):
        super().__init__(waiting)
        self.waiting = waiting


# Let a request through when nobody waits and there is room (or there is no bound).
_ENTER = """
local capacity = tonumber(ARGV[1])
if redis.call('ZCARD', KEYS[2]) == 0 and (capacity < 0 or tonumber(redis.call('GET', KEYS[1]) or '0') < capacity) then
  redis.call('INCR', KEYS[1])
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
# Take a place in the queue, fairly: max(the last let through, the caller's previous place) + 1; refused when full.
_WAIT = """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local mine = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
local place = math.max(last, mine) + 1
redis.call('HSET', KEYS[3], ARGV[2], place)
redis.call('ZADD', KEYS[1], place, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return place
"""
# The head of the queue goes through when there is room; a head whose waiter is gone (past its deadline,
# the first part of its name) is dropped.
_TURN = """
local now = tonumber(ARGV[3])
while true do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #head == 0 then return 0 end
  local deadline = tonumber(string.sub(head[1], 1, string.find(head[1], ':') - 1))
  if deadline >= now then
    if head[1] ~= ARGV[1] then return 0 end
    local capacity = tonumber(ARGV[2])
    if capacity >= 0 and tonumber(redis.call('GET', KEYS[1]) or '0') >= capacity then return 0 end
    redis.call('ZREM', KEYS[2], head[1])
    redis.call('SET', KEYS[3], head[2], 'EX', ARGV[4])
    redis.call('INCR', KEYS[1])
    redis.call('EXPIRE', KEYS[1], ARGV[4])
    return 1
  end
  redis.call('ZREM', KEYS[2], head[1])
end
"""


def _queue_keys(job_id: int) -> tuple[str, str, str, str]:
    base = f"{PREFIX}:queue:{job_id}"
    return f"{base}:in-flight", f"{base}:waiting", f"{base}:last", f"{base}:places"


def in_flight(job_id: int) -> int:
    try:
        return int(redis_client().get(_queue_keys(job_id)[0]) or 0)
    except redis.RedisError:
        return 0


def waiting(job_id: int) -> int:
    try:
        return int(redis_client().zcard(_queue_keys(job_id)[1]))
    except redis.RedisError:
        return 0


class Gate:
    """One request's passage: `enter` (waiting in the queue when it must), then `leave` once its answer ends."""

    def __init__(self, job_id: int, caller: str):
        self.job_id, self.caller, self.entered = job_id, caller, False
        self.keys = _queue_keys(job_id)
        self.expire_s = int(settings.SERVE_COLD_START_TIMEOUT_S) + 600   # a lost process's count ages out

    def _call(self, script: str, keys: tuple[str, ...] | list[str], *args) -> int | None:
        try:
            return int(redis_client().eval(script, len(keys), *keys, *args))
        except redis.RedisError as error:
            log.warning("/serve/ queue off: Redis unreachable (%s)", error)
            return None

    async def enter(self, capacity: int | None, timeout_s: float) -> float | None:
        """Through now (None) or after waiting (the seconds waited); QueueFull when the queue is full,
        TimeoutError after `timeout_s`."""
        bound = -1 if capacity is None else capacity
        in_flight_key, queue, last, places = self.keys
        through = await sync_to_async(self._call, thread_sensitive=False)(
            _ENTER, (in_flight_key, queue), bound, self.expire_s)
        if through is None or through == 1:
            self.entered = through == 1
            return None
        started = time.time()
        deadline = started + timeout_s
        member = f"{deadline:.3f}:{uuid.uuid4().hex}"
        place = await sync_to_async(self._call, thread_sensitive=False)(
            _WAIT, (queue, last, places), member, self.caller, settings.SERVE_QUEUE_MAX, self.expire_s)
        if place is None:
            return None
        if place < 0:
            raise QueueFull(settings.SERVE_QUEUE_MAX)
        try:
            while time.time() < deadline:
                turn = await sync_to_async(self._call, thread_sensitive=False)(
                    _TURN, (in_flight_key, queue, last), member, bound, f"{time.time():.3f}", self.expire_s)
                if turn is None or turn == 1:
                    self.entered = turn == 1
                    return time.time() - started
                await asyncio.sleep(POLL_S)
        finally:
            if not self.entered:   # timed out or the client went: out of the queue
                await sync_to_async(self._forget, thread_sensitive=False)(member)
        raise TimeoutError

    def _forget(self, member: str) -> None:
        try:
            redis_client().zrem(self.keys[1], member)
        except redis.RedisError:
            pass

    def leave(self) -> None:
        if not self.entered:
            return
        self.entered = False
        try:
            redis_client().decr(self.keys[0])
        except redis.RedisError:
            pass
