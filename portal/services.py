"""Writes."""

import json
import logging
from datetime import timedelta
from functools import cache

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.translation import gettext
from redis.exceptions import RedisError

from billing.models import hash_token
from portal import time_zones
from portal.live.watch import layer_redis_url
from portal.models import ApiToken, TokenScope, UserPreference, Workspace
from portal.selectors import get_workspace_for_user
from scheduling.api import DomainError, clock

log = logging.getLogger(__name__)


def switch_workspace(request, slug: str) -> Workspace:
    workspace = get_workspace_for_user(request.user, slug)
    request.session["workspace"] = workspace.slug
    return workspace


TOKEN_DAYS = (1, 7, 30, 90, 180, 365)  # the lifetimes offered; 90 by default
DEFAULT_TOKEN_DAYS = 90


def create_api_token(user, name: str, *, scope: str = TokenScope.SUBMIT,
                     days: int | str = DEFAULT_TOKEN_DAYS) -> tuple[ApiToken, str]:
    """Returns the token and its raw value, which is never stored and shown only once. It expires
    `days` days from now. Every bad field is refused at once, by field, and nothing is made."""
    errors: dict[str, list[str]] = {}
    name = (name or "").strip()
    if not name:
        errors["name"] = [gettext("a token needs a name")]
    elif "\x00" in name or len(name) > 100:
        errors["name"] = [gettext("at most 100 characters, no NUL")]
    if scope not in TokenScope.values:
        errors["scope"] = [gettext("%(scope)s is not a scope: one of %(scopes)s") % {
            "scope": repr(str(scope)[:20]), "scopes": ", ".join(TokenScope.values)}]
    try:
        days = int(days)
    except (TypeError, ValueError):
        days = None
    if days not in TOKEN_DAYS:
        errors["days"] = [gettext("choose a lifetime of %(days)s days") % {"days": ", ".join(map(str, TOKEN_DAYS))}]
    if errors:
        raise DomainError(errors)
    raw = ApiToken.new_raw_value()
    token = ApiToken.objects.create(user=user, name=name, digest=hash_token(raw), hint=raw[:10], scope=scope,
                                    expires=clock.now() + timedelta(days=days))
    return token, raw


def revoke_api_token(user, token_id: int | str) -> None:
    try:
        token_id = int(token_id)
    except (TypeError, ValueError):
        raise DomainError(gettext("%(token)s is not a token number") % {"token": repr(token_id)}, field="revoke") from None
    if not 0 < token_id < 2**63:
        raise DomainError(gettext("%(token)s is not a token number") % {"token": token_id}, field="revoke")
    ApiToken.objects.filter(user=user, pk=token_id, revoked__isnull=True).update(revoked=clock.now())


def set_time_zone(user, zone: str) -> UserPreference:
    """The zone the user's pages show times in; "" goes back to the platform's. A zone the zone
    database does not know is refused and nothing changes."""
    zone = zone.strip()
    if "\x00" in zone:
        raise DomainError(gettext("must not contain a NUL character"), field="time_zone")
    if len(zone) > (longest := UserPreference._meta.get_field("time_zone").max_length):
        raise DomainError(gettext("not a time zone: at most %(characters)s characters") % {"characters": longest},
                          field="time_zone")
    if zone and not time_zones.is_known(zone):
        raise DomainError(gettext("%(zone)s is not a time zone; choose one from the list, e.g. Asia/Shanghai") % {
            "zone": repr(zone)}, field="time_zone")
    preference, _ = UserPreference.objects.update_or_create(user=user, defaults={"time_zone": zone})
    return preference


def set_language(user, language: str) -> UserPreference:
    """The interface language of the user's pages; "" goes back to the browser's. A language the
    platform does not offer is refused and nothing changes."""
    language = language.strip()
    if language and language not in dict(settings.LANGUAGES):
        offered = ", ".join(code for code, _ in settings.LANGUAGES)
        raise DomainError(gettext("%(language)s is not a language; choose one of %(offered)s") % {
            "language": repr(language[:40]), "offered": offered}, field="language")
    preference, _ = UserPreference.objects.update_or_create(user=user, defaults={"language": language})
    return preference


OPERATORS_GROUP = "operators"


def workspace_group(workspace_id: int) -> str:
    return f"workspace.{workspace_id}"


def job_group(job_id: int) -> str:
    return f"job.{job_id}"


def publish(groups: list[str], event: dict) -> None:
    """Send an event to every open page following one of the groups.

    Best effort: the database is the record, pages catch up on reload, so a Redis outage
    must never undo or fail the write that produced the event.
    """
    _send([(groups, event)])


def publish_job_events(sender, events, **kwargs) -> None:
    """Connected to scheduling's job_events_committed: each event goes to its job's page, its
    workspace's pages and the operators, all in one go."""
    _send([([workspace_group(job.workspace_id), job_group(job.pk), OPERATORS_GROUP], message)
           for job, message in events])


def _send(events: list[tuple[list[str], dict]]) -> None:
    if not events:
        return
    layer = get_channel_layer()
    # Encoded once here rather than once per open socket.
    messages = [(groups, json.dumps({"type": "event", "event": event}, cls=DjangoJSONEncoder))
                for groups, event in events]
    try:
        if _publish_pipelined(layer, messages):
            return
    except (RedisError, OSError) as error:
        log.warning("%d live updates not sent: Redis unreachable (%s)", len(messages), error)
        return

    async def send_all():
        for groups, text in messages:
            for group in groups:
                await layer.group_send(group, {"type": "live.event", "text": text})

    try:
        async_to_sync(send_all)()
    except (RedisError, OSError) as error:  # Redis down or not up yet: pages catch up on reload
        log.warning("%d live updates not sent: Redis unreachable (%s)", len(messages), error)
    except Exception:
        log.warning("%d live updates not sent", len(messages), exc_info=True)


# PUBLISH commands a pipeline sends at once
PIPELINE_CHUNK = 2000


def _publish_pipelined(layer, messages: list[tuple[list[str], str]]) -> bool:
    """On one Redis's pub/sub layer: the PUBLISH commands its group_send makes, in the same order to the
    same channels, sent as pipelines rather than a round trip each (a cycle's 20,000 events are 60,000
    of them). False, nothing sent, for another layer."""
    url = layer_redis_url()
    if type(layer) is not RedisPubSubChannelLayer or url is None:
        return False
    prefix = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("prefix", "asgi")
    pipe = _publisher(url).pipeline(transaction=False)
    for groups, text in messages:
        payload = layer.serialize({"type": "live.event", "text": text})
        for group in groups:
            pipe.publish(f"{prefix}__group__{group}", payload)   # the layer's name for a group's channel
        if len(pipe) >= PIPELINE_CHUNK:
            pipe.execute()
    pipe.execute()
    return True


@cache
def _publisher(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def publish_to_workspace(workspace: Workspace, event: dict) -> None:
    publish([workspace_group(workspace.pk)], event)
