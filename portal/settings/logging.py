"""Logs: one line per request at INFO; heartbeats, polling and the beat's routine tasks at DEBUG (portal/logs.py)."""

import os

from portal import logs

LOGGING = logs.logging_config(os.environ.get("LOG_LEVEL", "INFO"))
