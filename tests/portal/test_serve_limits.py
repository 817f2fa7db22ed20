"""/serve/'s limits in Redis (portal.serve_limits): requests and tokens per minute per service and per key,
and the portal's queue at max replicas, fair across callers and bounded by SERVE_QUEUE_MAX."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from portal import serve_limits
from portal.serve_limits import Gate, QueueFull, Scope


def scope(name="service", rpm=None, tpm=None) -> Scope:
    return Scope(name, f"{name}:{uuid.uuid4().hex}", rpm, tpm)


def test_requests_per_minute_per_scope_and_the_seconds_left_in_the_minute():
    service, key = scope(rpm=3), scope("key", rpm=2)
    now = 60 * 1000 + 15.0   # 15 s into a minute
    assert serve_limits.admit([service, key], now) is None
    assert serve_limits.admit([service, key], now) is None
    over = serve_limits.admit([service, key], now)
    assert over is not None and over.scope == key and over.what == "requests" and over.limit == 2
    assert over.retry_after_s == 45
    # refused requests count nowhere: the service has used 2 of its 3
    assert serve_limits.admit([service], now) is None
    assert serve_limits.admit([service], now).scope == service
    # the next minute starts afresh
    assert serve_limits.admit([service, key], now + 60) is None


def test_tokens_per_minute_count_what_the_answers_used():
    service = scope(tpm=100)
    now = 60 * 2000 + 1.0
    assert serve_limits.admit([service], now) is None
    serve_limits.add_tokens([service], 60, now)
    assert serve_limits.admit([service], now) is None
    serve_limits.add_tokens([service], 40, now)
    over = serve_limits.admit([service], now)
    assert over.what == "tokens" and over.limit == 100 and over.retry_after_s == 59


def test_no_limits_count_nothing():
    assert serve_limits.admit([scope(), scope("key")]) is None


def test_the_queue_lets_callers_through_fairly_and_refuses_past_its_bound(settings):
    settings.SERVE_QUEUE_MAX = 5
    job = int(uuid.uuid4().int % 10**9)
    order: list[str] = []

    async def scenario():
        holder = Gate(job, "key:busy")
        assert await holder.enter(1, 5) is None           # the one place in flight
        gates = []

        async def call(caller: str):
            gate = Gate(job, caller)
            gates.append(gate)
            await gate.enter(1, 10)
            order.append(caller)
            await asyncio.sleep(0.02)
            gate.leave()

        # a flood from one key, then one request from another: the other's goes second, not last
        tasks = [asyncio.create_task(call("key:flood")) for _ in range(4)]
        await asyncio.sleep(0.2)
        tasks.append(asyncio.create_task(call("key:other")))
        await asyncio.sleep(0.2)
        assert serve_limits.waiting(job) == 5
        with pytest.raises(QueueFull):
            await Gate(job, "key:late").enter(1, 5)
        holder.leave()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())
    assert order == ["key:flood", "key:other", "key:flood", "key:flood", "key:flood"]
    assert serve_limits.in_flight(job) == 0 and serve_limits.waiting(job) == 0


def test_below_max_replicas_nothing_waits(settings):
    job = int(uuid.uuid4().int % 10**9)

    async def scenario():
        gates = [Gate(job, "key:a") for _ in range(20)]
        assert [await g.enter(None, 1) for g in gates] == [None] * 20
        assert serve_limits.in_flight(job) == 20
        for g in gates:
            g.leave()

    asyncio.run(scenario())
    assert serve_limits.in_flight(job) == 0
