"""Live sockets across a Redis restart, in-process: the real consumers, watch and pub/sub channel layer
against a redis-server that each test kills and starts again.

After the watch has closed every socket of the old server, the layer is flushed, so sockets that
join afterwards subscribe on a new connection instead of trusting the layer's own replay of its
subscriptions; a socket that was half-way through joining during that flush is paused, not left deaf.
"""

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
import redis
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from portal import embedded_redis, redis_urls
from portal.live.consumers import TRY_AGAIN_LATER, WorkspaceConsumer
from portal.services import publish, workspace_group

pytestmark = pytest.mark.django_db(transaction=True)


class KillableRedis:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="live-redis-", dir="/tmp"))  # a socket path is short
        self.url = f"unix://{self.folder}/redis.sock?db=0"
        self.proc = None

    def start(self) -> None:
        self.proc = embedded_redis.start(self.url, log_file=self.folder / "redis.log")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def killable_redis(settings):
    server = KillableRedis()
    server.start()
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_urls.for_redis_py(server.url)], "prefix": redis_urls.channel_layer_prefix(server.url)},
    }}
    yield server
    if server.proc.poll() is None:
        server.kill()
    shutil.rmtree(server.folder, ignore_errors=True)


async def _open(consumer, user, slug: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(consumer.as_asgi(), f"/ws/workspaces/{slug}/")
    socket.scope["user"] = user
    socket.scope["url_route"] = {"kwargs": {"slug": slug}}
    return socket


async def _join(user, slug: str) -> WebsocketCommunicator:
    socket = await _open(WorkspaceConsumer, user, slug)
    connected, _ = await socket.connect(timeout=10)
    assert connected
    assert (await socket.receive_json_from(timeout=10))["type"] == "hello"
    return socket


async def _paused(socket: WebsocketCommunicator, within: float = 10) -> None:
    assert await socket.receive_json_from(timeout=within) == {"type": "paused"}
    assert await socket.receive_output(timeout=within) == {"type": "websocket.close", "code": TRY_AGAIN_LATER}
    await socket.disconnect()


async def _event_reaches(socket: WebsocketCommunicator, workspace_pk: int, name: str) -> None:
    await database_sync_to_async(publish)([workspace_group(workspace_pk)], {"job": name})
    assert await socket.receive_json_from(timeout=10) == {"type": "event", "event": {"job": name}}


def _subscribers(url: str, workspace_pk: int) -> int:
    prefix = redis_urls.channel_layer_prefix(url)
    channel = f"{prefix}__group__{workspace_group(workspace_pk)}"
    client = redis.Redis.from_url(redis_urls.for_redis_py(url))
    try:
        return dict(client.pubsub_numsub(channel))[channel.encode()]
    finally:
        client.close()


async def test_a_socket_that_joins_after_redis_restarted_hears_events_on_a_new_subscription(tenants, killable_redis):
    vision = tenants.vision.pk
    before = await _join(tenants.alice, "vision-lab")
    await _event_reaches(before, vision, "before")

    killable_redis.kill()
    await _paused(before)
    killable_redis.start()

    after = await _join(tenants.alice, "vision-lab")
    assert await asyncio.to_thread(_subscribers, killable_redis.url, vision) == 1  # the new server knows it
    await _event_reaches(after, vision, "after")
    await after.disconnect()


async def test_a_socket_half_way_through_joining_when_redis_goes_is_paused_and_its_retry_hears_events(
        tenants, killable_redis):
    vision = tenants.vision.pk
    authorising, go_on = asyncio.Event(), asyncio.Event()

    class SlowToAuthorise(WorkspaceConsumer):
        async def authorise(self):
            authorising.set()
            await go_on.wait()
            return await super().authorise()

    open_page = await _join(tenants.alice, "vision-lab")
    joining = await _open(SlowToAuthorise, tenants.alice, "vision-lab")
    connecting = asyncio.ensure_future(joining.connect(timeout=30))
    await asyncio.wait_for(authorising.wait(), 10)  # its channel exists; its group is not joined yet

    killable_redis.kill()
    await _paused(open_page)  # the watch closed the open socket and flushed the layer
    killable_redis.start()
    go_on.set()

    connected, _ = await connecting
    assert connected
    await _paused(joining)  # its channel went with the flush: told to come back, not left deaf
    retry = await _join(tenants.alice, "vision-lab")
    await _event_reaches(retry, vision, "retried")
    await retry.disconnect()
