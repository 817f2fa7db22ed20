"""Processes that share one machine: a secret key made by two at once is one key, and two platforms on one
Redis server with two database numbers never get each other's live events (pub/sub ignores the number)."""

import asyncio

from asgiref.sync import async_to_sync
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from portal import redis_urls
from portal.settings import security


def test_a_key_another_process_made_meanwhile_is_the_one_kept(tmp_path, monkeypatch):
    key_file = tmp_path / "secret-key"
    made = iter(["ours", "theirs"])

    def made_meanwhile(nbytes):  # the other process writes its key while this one makes its own
        key = next(made)
        if key == "ours":
            key_file.write_text("theirs")
        return key

    monkeypatch.setattr(security.secrets, "token_urlsafe", made_meanwhile)
    assert security.kept_secret_key(key_file) == "theirs"
    assert key_file.read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["secret-key"]


def test_a_kept_key_is_read_back(tmp_path):
    key_file = tmp_path / "secret-key"
    first = security.kept_secret_key(key_file)
    assert len(first) > 40 and security.kept_secret_key(key_file) == first


def _with_db(url: str, db: int) -> str:
    loc = redis_urls.parse(url)
    if loc.socket_path:
        return f"unix://{loc.socket_path}?db={db}"
    return url.rsplit("/", 1)[0] + f"/{db}"


def test_two_database_numbers_on_one_server_never_hear_each_other(redis_server):
    mine, other = (_with_db(settings.REDIS_URL, db) for db in (1, 2))
    assert redis_urls.channel_layer_prefix(mine) != redis_urls.channel_layer_prefix(other)

    def layer(url):
        return RedisPubSubChannelLayer(hosts=[url], prefix=redis_urls.channel_layer_prefix(url))

    async def scenario():
        listening, elsewhere = layer(mine), layer(other)
        channel = await listening.new_channel()
        await listening.group_add("operators", channel)
        await elsewhere.group_send("operators", {"type": "live.event", "n": "elsewhere"})
        await listening.group_send("operators", {"type": "live.event", "n": "mine"})
        message = await asyncio.wait_for(listening.receive(channel), timeout=10)
        await listening.group_discard("operators", channel)
        await listening.flush()
        await elsewhere.flush()
        return message

    assert async_to_sync(scenario)()["n"] == "mine"


def test_database_zero_keeps_the_default_channel_names():
    assert redis_urls.channel_layer_prefix("redis://127.0.0.1:6379/0") == "asgi"
    assert redis_urls.channel_layer_prefix("redis://127.0.0.1:6379") == "asgi"
