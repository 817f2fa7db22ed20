"""The scheduling cycle's lock on the real Redis: a dead holder's lock frees after its short TTL;
a live holder keeps it for as long as it runs by renewing it."""

import time
import uuid

import pytest
import redis

from scheduling.tasks import LOCK_TTL_S, cycle_lock, renewed


@pytest.fixture
def client(settings):
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def name():
    return f"test-cycle-lock-{uuid.uuid4().hex}"


def test_the_lock_ttl_is_short(client, name):
    lock = cycle_lock(client, name)
    assert lock.acquire()
    try:
        assert 0 < client.pttl(name) <= LOCK_TTL_S * 1000 <= 10_000
    finally:
        lock.release()


def test_a_dead_holders_lock_is_free_again_after_its_ttl(client, name):
    dead = cycle_lock(client, name, ttl=1)
    assert dead.acquire()  # and never renewed nor released: the worker died
    assert not cycle_lock(client, name, ttl=1).acquire()
    deadline = time.monotonic() + 30
    successor = cycle_lock(client, name, ttl=1)
    while not successor.acquire():
        assert time.monotonic() < deadline, "the dead holder's lock never expired"
        time.sleep(0.1)
    successor.release()


def test_a_long_cycle_keeps_its_lock_by_renewing_it(client, name):
    lock = cycle_lock(client, name, ttl=1)
    assert lock.acquire()
    with renewed(lock, every=0.2):
        # Well past the TTL, nobody else gets it and it is still ours.
        until = time.monotonic() + 3
        while time.monotonic() < until:
            assert not cycle_lock(client, name, ttl=1).acquire()
            time.sleep(0.1)
        assert lock.owned()
    lock.release()
    assert cycle_lock(client, name, ttl=1).acquire()


def test_without_renewal_the_same_wait_loses_the_lock(client, name):
    """The control for the test above: the TTL really is shorter than that wait."""
    lock = cycle_lock(client, name, ttl=1)
    assert lock.acquire()
    deadline = time.monotonic() + 30
    while lock.owned():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert cycle_lock(client, name, ttl=1).acquire()
