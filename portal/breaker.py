"""The database breaker: once a request met the database down, the next ones are answered 503 at once
(portal.door) instead of each waiting for a pool timeout behind the others; a probe tries the database
again every DB_BREAKER_PROBE_S until it answers. The state is per process: each web process finds out
for itself, within one request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, connections
from psycopg_pool import PoolTimeout


class DatabaseBreaker:
    def __init__(self, probe_every_s: float | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._probe_every_s = probe_every_s
        self._monotonic = monotonic
        self._lock = threading.Lock()  # tripped from Django's request threads, read on the event loop
        self._open = False
        self._probing = False
        self._next_probe_at = 0.0

    @property
    def probe_every_s(self) -> float:
        return settings.DB_BREAKER_PROBE_S if self._probe_every_s is None else self._probe_every_s

    @property
    def is_open(self) -> bool:
        """Whether the database was seen down and has not been reached since."""
        return self._open

    def trip(self) -> None:
        """A request met the database down."""
        with self._lock:
            if not self._open:
                self._open = True
                self._next_probe_at = self._monotonic() + self.probe_every_s

    def probe_due(self) -> bool:
        """True once per interval while open: the caller then probes and reports with probed()."""
        with self._lock:
            if not self._open or self._probing or self._monotonic() < self._next_probe_at:
                return False
            self._probing = True
            return True

    def probed(self, reachable: bool) -> None:
        with self._lock:
            self._probing = False
            if reachable:
                self._open = False
            else:
                self._next_probe_at = self._monotonic() + self.probe_every_s

    def reset(self) -> None:
        with self._lock:
            self._open, self._probing, self._next_probe_at = False, False, 0.0


def means_unreachable(exception: BaseException | None) -> bool:
    """Whether a database error (as Django raises it, the driver's error its cause) says the database cannot
    be reached, rather than that one query failed (a statement timeout, a lock) or the pool was busy: only
    then does it trip."""
    if isinstance(exception, InterfaceError):
        return True  # the connection is gone
    cause = getattr(exception, "__cause__", None)
    if isinstance(cause, PoolTimeout):  # a pool busy under load times out too: only a cut-off one trips
        return not database_answers_unpooled()
    if type(cause) is psycopg.OperationalError:  # connecting failed (its subclasses are server-side errors)
        return True
    # a connection exception (08...) or the server shutting down or starting (57P...)
    sqlstate = getattr(cause, "sqlstate", None) or ""
    return sqlstate.startswith(("08", "57P"))


def database_reachable(using: str = DEFAULT_DB_ALIAS) -> bool:
    """One round trip to the database from the calling thread, whose connection is given back after."""
    from portal.health import check_database

    try:
        return check_database(using) == "ok"
    finally:
        connections[using].close()


def database_answers_unpooled(using: str = DEFAULT_DB_ALIAS, timeout_s: int = 1) -> bool:
    """Whether a connection of its own (not one from the pool) reaches the database: a pool that timed out
    may be busy rather than cut off, and a busy one must not shut every request out."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return True  # no pool there
    params = {**connection.get_connection_params(), "connect_timeout": timeout_s}
    try:
        with psycopg.connect(**params) as direct:
            direct.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


database_breaker = DatabaseBreaker()
