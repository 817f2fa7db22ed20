"""One REDIS_URL for every client: only the spelling of unix sockets differs between them.

Accepted forms: ``redis://[:password@]host:port/N``, ``rediss://...`` and
``unix:///path/to/redis.sock?db=N`` (the embedded default).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class RedisLocation:
    url: str
    socket_path: str | None  # set for unix sockets
    db: int


def parse(url: str) -> RedisLocation:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        db = int(parse_qs(parts.query).get("db", ["0"])[0])
        return RedisLocation(url=url, socket_path=parts.path, db=db)
    if parts.scheme in ("redis", "rediss"):
        path = parts.path.strip("/")
        return RedisLocation(url=url, socket_path=None, db=int(path) if path else 0)
    raise ValueError(f"REDIS_URL must start with redis://, rediss:// or unix:// (got {url!r})")


def for_celery(url: str) -> str:
    """Kombu and Celery's result backend spell unix sockets ``redis+socket://PATH?virtual_host=N``."""
    loc = parse(url)
    if loc.socket_path:
        return f"redis+socket://{loc.socket_path}?virtual_host={loc.db}"
    return url


def channel_layer_prefix(url: str) -> str:
    """The channel layer's names for `url`. Pub/sub channels belong to the whole Redis server, whatever
    the database number, so the names carry the number (database 0 keeps channels_redis' own "asgi"):
    two platforms on one server with two numbers (parallel test workers, staging beside production)
    never get each other's events."""
    db = parse(url).db
    return "asgi" if db == 0 else f"asgi.db{db}."


def for_redis_py(url: str) -> str:
    """redis-py (and channels_redis, which uses it) understands both forms as they are."""
    parse(url)
    return url
