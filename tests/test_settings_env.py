"""The test run's own settings (tests/settings_env.py): under pytest-xdist, each worker's Redis database."""

import pytest

from tests.settings_env import redis_url_for_worker


@pytest.mark.parametrize(("url", "worker", "expected"), [
    ("redis://127.0.0.1:6379/11", "gw0", "redis://127.0.0.1:6379/11"),
    ("redis://127.0.0.1:6379/11", "gw1", "redis://127.0.0.1:6379/12"),
    ("redis://:secret@cache:6379/15", "gw1", "redis://:secret@cache:6379/0"),  # a server has 16
    ("redis://cache:6379", "gw2", "redis://cache:6379/2"),
    ("rediss://cache:6380/3?ssl_cert_reqs=none", "gw1", "rediss://cache:6380/4?ssl_cert_reqs=none"),
    ("unix:///run/redis.sock?db=3", "gw2", "unix:///run/redis.sock?db=5"),
    ("unix:///run/redis.sock", "gw1", "unix:///run/redis.sock?db=1"),
])
def test_each_worker_gets_its_own_redis_database(url, worker, expected):
    assert redis_url_for_worker(url, worker) == expected
