"""Websocket consumers: who may join is decided on connect, then the socket joins one group.

Every consumer forwards the group's events as `{"type": "event", "event": {...}}` frames.
With Redis unreachable a socket is accepted, told `{"type": "paused"}` and closed with 4013
("try again later"): the page keeps working, shows that live updates are paused and reconnects.
An open socket is closed the same way when Redis goes away or restarts (portal/live/watch.py).
"""

import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from redis.exceptions import RedisError

from portal import metrics
from portal.live import watch
from portal.models import Workspace
from portal.services import OPERATORS_GROUP, job_group, workspace_group

FORBIDDEN = 4403
TRY_AGAIN_LATER = 4013  # 1013 "try again later" in the application range (Daphne allows 1000, 3000-4999)
# What the Redis channel layer raises when Redis is down (redis-py's errors and socket errors).
LAYER_DOWN = (RedisError, OSError)

log = logging.getLogger(__name__)


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Joins the group `authorise()` names; refuses the handshake when it names none."""

    async def authorise(self) -> tuple[str, dict] | None:
        """(group, hello fields) if the connecting user may follow it, else None."""
        raise NotImplementedError

    async def __call__(self, scope, receive, send):
        self.watch = watch.for_this_loop()
        # Read before Channels makes this socket's channel: a flush after this leaves it unsubscribed.
        self.generation = self.watch.generation if self.watch is not None else 0
        try:
            await super().__call__(scope, receive, send)
        except LAYER_DOWN as exc:
            # Channels subscribes the socket's own channel before anything is received, so the
            # handshake is still ours to answer.
            log.warning("live updates paused: channel layer unreachable (%s)", exc)
            if (await receive())["type"] == "websocket.connect":
                await self._paused(send)

    @staticmethod
    async def _paused(send):
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": '{"type": "paused"}'})
        await send({"type": "websocket.close", "code": TRY_AGAIN_LATER})

    async def connect(self):
        granted = await self.authorise() if self.scope["user"].is_authenticated else None
        if granted is None:
            await self.close(code=FORBIDDEN)
            return
        if self.watch is not None and self.watch.generation != self.generation:
            log.warning("live updates paused: Redis went away while this socket joined")
            await self._paused(self.base_send)  # its channel went with the layer's flush
            return
        self.group, hello = granted
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except LAYER_DOWN as exc:
            log.warning("live updates paused: channel layer unreachable (%s)", exc)
            del self.group
            await self._paused(self.base_send)
            return
        if self.watch is not None and not await self.watch.join(self, self.generation):
            log.warning("live updates paused: Redis stopped answering or restarted while this socket joined")
            await self._paused(self.base_send)
            return
        await self.accept()
        metrics.websocket_opened(self)
        await self.send_json({"type": "hello", **hello})

    async def pause(self):
        """Redis went away or restarted under this socket: events may be lost, so let the page
        reconnect and catch up."""
        try:
            await self.send_json({"type": "paused"})
            await self.close(code=TRY_AGAIN_LATER)
        except Exception as exc:  # the client may be gone already
            log.info("could not pause a live socket: %s", exc)

    async def disconnect(self, code):
        metrics.websocket_closed(self)
        if getattr(self, "watch", None) is not None:
            self.watch.leave(self)
        if hasattr(self, "group"):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except LAYER_DOWN:
                pass  # nothing to leave: Redis forgets its subscriptions when it goes

    async def dispatch(self, message):
        # Channels runs close_old_connections() in a worker thread before every handler. Live
        # events touch no database, and that thread hop per client per event serialises the
        # fan-out to every open page (bench.live: p95 at 500 clients 382 -> 189 ms with the pub/sub layer).
        if message["type"] == "live.event":
            await self.live_event(message)
        else:
            await super().dispatch(message)

    async def live_event(self, message):
        await self.send(text_data=message["text"])  # already the JSON frame


class WorkspaceConsumer(LiveConsumer):
    """Every job event of one workspace: members only."""

    @database_sync_to_async
    def authorise(self):
        slug = self.scope["url_route"]["kwargs"]["slug"]
        pk = Workspace.objects.filter(slug=slug, memberships__user=self.scope["user"]).values_list("pk", flat=True).first()
        return (workspace_group(pk), {"workspace": slug}) if pk else None


class JobConsumer(LiveConsumer):
    """One job's events: members of its workspace only."""

    @database_sync_to_async
    def authorise(self):
        from scheduling.models import Job

        job_id = self.scope["url_route"]["kwargs"]["job_id"]
        visible = Job.objects.filter(pk=job_id, workspace__memberships__user=self.scope["user"]).exists()
        return (job_group(job_id), {"job": job_id}) if visible else None


class OperatorsConsumer(LiveConsumer):
    """Cluster-wide events (every job, placements): operators (staff) only."""

    async def authorise(self):
        return (OPERATORS_GROUP, {"cluster": True}) if self.scope["user"].is_staff else None
