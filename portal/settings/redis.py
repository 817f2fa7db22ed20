"""Redis: one server for the Celery broker and results (portal/settings/celery.py), the Channels
layer and the cache. Without REDIS_URL the project starts its own on a unix socket under VAR_DIR."""

import os
from pathlib import Path

from portal import redis_urls
from portal.settings.env import VAR_DIR

EMBEDDED_REDIS = "REDIS_URL" not in os.environ
# Tests give each run its own socket, so they never touch a running `make run`.
EMBEDDED_REDIS_SOCKET = Path(os.environ.get("EMBEDDED_REDIS_SOCKET") or VAR_DIR / "redis.sock")
REDIS_URL = os.environ.get("REDIS_URL", f"unix://{EMBEDDED_REDIS_SOCKET}?db=0")
redis_urls.parse(REDIS_URL)  # fail fast on a malformed URL

# Redis pub/sub: one publish per event reaches every Daphne process, which fans it out to its
# sockets. At-most-once delivery is right for live pages (the database is the record; a page
# that missed an event catches up on reload).
# The channel names carry REDIS_URL's database number: pub/sub ignores it (redis_urls.channel_layer_prefix).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_urls.for_redis_py(REDIS_URL)],
                   "prefix": redis_urls.channel_layer_prefix(REDIS_URL)},
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_urls.for_redis_py(REDIS_URL),
        "KEY_PREFIX": "portal",
    }
}
