"""Closes this process's live sockets when Redis goes away or comes back as a new server.

Redis pub/sub keeps nothing: what is published while Redis is down, or before a restarted server
has our subscriptions again, never arrives, and an open socket would not know it missed it. So
every CHECK_EVERY_S the watch asks Redis for its run id; when Redis does not answer, or answers
with another run id than the one a socket joined on, the socket is told `{"type": "paused"}` and
closed with 4013. The page shows its banner, reconnects with backoff and, once it has joined
again ("hello"), re-reads the state it may have missed.

Once every socket is closed so, the process's channel layer is flushed: the sockets that join next
subscribe on a new connection. Left to itself the layer reconnects on first use, and its receive loop
and a joining socket can both be connecting then; when they are, the subscriptions the layer replays
on reconnect can be skipped, and the layer goes on believing in groups the new server never heard of.
A socket that was joining while the layer was flushed is paused too (`generation`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from channels.layers import get_channel_layer
from django.conf import settings
from redis import asyncio as aioredis

log = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0
# What a Redis that is down raises (redis-py's errors and socket errors).
_DOWN = (aioredis.RedisError, OSError, asyncio.TimeoutError)


def layer_redis_url() -> str | None:
    """The Redis the channel layer publishes through, when it is a Redis layer given by URL."""
    layer = settings.CHANNEL_LAYERS.get("default", {})
    hosts = layer.get("CONFIG", {}).get("hosts") or []
    if "redis" not in layer.get("BACKEND", "").lower() or len(hosts) != 1 or not isinstance(hosts[0], str):
        return None
    return hosts[0]


class RedisWatch:
    """One per event loop: the loop's open sockets, each with the run id of the Redis it joined on."""

    def __init__(self, url: str, every: float = CHECK_EVERY_S) -> None:
        self.url = url
        self.every = every
        self.sockets: dict[object, str | None] = {}
        self.run_id: str | None = None  # the last one seen; None: Redis did not answer
        self.task: asyncio.Task | None = None
        self._client = None
        # How many times the layer was flushed; a socket whose channel is older is no longer subscribed.
        self.generation = 0

    async def _current(self) -> str | None:
        if self._client is None:
            self._client = aioredis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            return (await self._client.info("server")).get("run_id")
        except _DOWN:
            return None

    async def join(self, consumer, generation: int) -> bool:
        """Watch `consumer`, which has just joined its group on a channel made at `generation`; False
        when Redis no longer answers or the layer was flushed since."""
        if generation != self.generation:
            return False
        if self.run_id is None:
            self.run_id = await self._current()
            if self.run_id is None:
                return False
        self.sockets[consumer] = self.run_id
        if self.task is None:
            self.task = asyncio.ensure_future(self._watch())
        return True

    def leave(self, consumer) -> None:
        self.sockets.pop(consumer, None)

    async def _watch(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.every)
                if not self.sockets:
                    self.task = None  # before any await: a join from now on starts a new watch
                    return
                self.run_id = now = await self._current()
                stale = [consumer for consumer, joined in self.sockets.items() if joined != now]
                if stale:
                    log.warning("live updates paused: Redis %s; closing %d sockets so their pages catch up",
                                "unreachable" if now is None else "restarted", len(stale))
                for consumer in stale:
                    self.sockets.pop(consumer, None)
                    await consumer.pause()
                if stale and not self.sockets:
                    await self._flush_layer()
        finally:
            if self.task is asyncio.current_task():
                self.task = None
            client, self._client = self._client, None
            if client is not None:
                await client.aclose()


    async def _flush_layer(self) -> None:
        self.generation += 1  # before any await: a socket joining from now on is paused or subscribes anew
        try:
            await get_channel_layer().flush()
        except _DOWN as error:  # closing connections to a Redis that is gone
            log.info("channel layer flushed with errors: %s", error)


_watches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def for_this_loop() -> RedisWatch | None:
    """The running loop's watch; None when the channel layer is not one Redis named by URL."""
    url = layer_redis_url()
    if url is None:
        return None
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None or watch.url != url:
        watch = _watches[loop] = RedisWatch(url)
    return watch
