"""The console's writes about node health: a pool's idle GPU policy, and the audit lines of nodes
that went NotReady or ready again by their agents' heartbeats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from portal import history_catalogue as texts
from portal.console import audit
from portal.console.services import ConsoleError
from scheduling.api import said
from scheduling.forms import IdlePolicyForm
from scheduling.models import NodePool

IDLE_FIELDS = tuple(IdlePolicyForm.Meta.fields)


@transaction.atomic
def save_idle_policy(user, pool: NodePool, data: Mapping[str, Any]) -> NodePool:
    """Change a pool's idle policy; ConsoleError names the bad fields and nothing changes."""
    pool = NodePool.objects.select_for_update().get(pk=pool.pk)
    before = audit.snapshot(pool, IDLE_FIELDS)
    form = IdlePolicyForm(data, instance=pool)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    pool = form.save()
    changes = audit.diff(before, audit.snapshot(pool, IDLE_FIELDS))
    if changes:
        audit.record(user, "idle policy", pool, changes=changes)
    return pool


def record_readiness_changes(sender=None, *, changes, **kwargs) -> None:
    """Connected to scheduling's node_readiness_changed: one audit line per node, by "system"."""
    for change in changes:
        seconds = int(change.silent_for.total_seconds())
        if change.silent:
            message = said(texts.NODE_NOT_READY, seconds=seconds,
                           heartbeat=f"{change.last_heartbeat:%Y-%m-%d %H:%M:%S %Z}")
        else:
            message = said(texts.NODE_READY_AGAIN)
        audit.record(None, "not ready" if change.silent else "ready", change.node,
                     changes={"agent_silent": [not change.silent, change.silent]}, message=message)
