"""Why a replica was evicted, in words a tenant reads on the job page and in the API: who took
its GPUs, which queue's share was weighed, and the rule applied (the core's Evict cause)."""

from __future__ import annotations

from decimal import Decimal

from scheduling import history_catalogue as texts
from scheduling.core import model as cm
from scheduling.history_texts import Said, said

RULE_TEXT = {
    "fair-share": texts.RULE_FAIR_SHARE,
    "reclaim-within-deserved": texts.RULE_RECLAIM_WITHIN_DESERVED,
    "priority": texts.RULE_PRIORITY,
    "consolidation": texts.RULE_CONSOLIDATION,
    "reduce-cost": texts.RULE_REDUCE_COST,
    "node-lost": texts.RULE_NODE_LOST,
}


def eviction_cause(evict: cm.Evict, *, same_workspace: bool) -> dict[str, str]:
    """The cause as event data. The taking job is named only within the victim's own workspace:
    another tenant's job stays anonymous, its queue (cluster-wide, like quotas) does not."""
    return {"by_job": evict.by_job if same_workspace else "", "by_queue": evict.by_queue,
            "level": evict.level, "rule": evict.rule}


def explain_said(cause: dict[str, str]) -> Said | None:
    """One sentence: "taken by job 42 in queue team-a: queue team-b held more than its fair share"."""
    rule = RULE_TEXT.get(cause.get("rule", ""))
    level = cause.get("level") or cause.get("by_queue") or "?"
    why = said(rule, level=level) if rule and "%(level)s" in rule else said(rule) if rule else None
    by_job, by_queue = cause.get("by_job"), cause.get("by_queue")
    taker = (said(texts.TAKER_JOB, job=by_job, queue=by_queue) if by_job and by_queue
             else said(texts.TAKER_QUEUE, queue=by_queue) if by_queue else None)
    if taker and why:
        return said(texts.TAKEN_BY_WHY, taker=taker, why=why)
    return said(texts.TAKEN_BY, taker=taker) if taker else why


def lost_said(hours: Decimal, *, resumable: bool) -> Said:
    """What the eviction lost, in GPU-hours: the work since the replicas' last checkpoints, or since their start."""
    figure = f"{hours.normalize():f}" if hours else "0"
    return said(texts.LOST_SINCE_CHECKPOINT if resumable else texts.LOST_SINCE_START, hours=figure)
