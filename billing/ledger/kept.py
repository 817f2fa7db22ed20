"""Sums read from the ledger, kept in the cache until the ledger changes.

The key is the query's own SQL and parameters with the ledger's revision (`LedgerRevision`, a token that
changes in the transaction of every write to the charge lines), so a kept sum is exactly what the query
would read now: every user who reads the same figures between two writes shares one database read. The
cache being down only costs the read.

A page reads many kept figures; `one_revision()` around it reads the revision once for all of them. Made
for reading: after a write to the ledger inside the block, every read asks for the revision again (the
write may still roll back).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.db.models import QuerySet

from billing.models import LedgerRevision

log = logging.getLogger(__name__)
T = TypeVar("T")
KEPT_S = 3600  # an upper bound only: a new revision makes a new key


def one_revision():
    """Every kept read inside shares one read of the ledger's revision."""
    return LedgerRevision.one_read()


def ledger_read(query: QuerySet, compute: Callable[[], T], *, also: tuple = ()) -> T:
    """`compute()` of `query`'s rows, kept until the ledger changes. `also`: what else the value depends on
    (what `compute` does with the rows: a grouping, a rendering's language and time zone), part of the key."""
    digest = hashlib.sha256(repr((LedgerRevision.current(), _query_key(query), also)).encode()).hexdigest()
    key = f"ledger-read:{digest}"
    try:
        found = cache.get(key)
    except Exception as error:  # any cache backend's "unreachable"
        log.debug("ledger cache unreachable: %s", error)
        return compute()
    if found is not None:
        return found
    value = compute()
    try:
        cache.set(key, value, KEPT_S)
    except Exception as error:
        log.debug("ledger cache unreachable: %s", error)
    return value


def _query_key(query: QuerySet) -> tuple:
    """The query's database, SQL and parameters, compiled once per queryset: a page asks several sums of the
    same rows, and compiling the SQL was most of the cost of a kept read."""
    found = query.__dict__.get("_ledger_key")
    if found is None:
        sql, params = query.query.sql_with_params()
        found = query.__dict__["_ledger_key"] = (query.db, sql, params)
    return found
