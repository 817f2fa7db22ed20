"""Why a replica was evicted, in words a tenant reads on the job page and in the API: who took
its GPUs, which queue's share was weighed, and the rule applied (the core's Evict cause)."""

from __future__ import annotations

from django.utils.translation import gettext_noop

from scheduling.core import model as cm
from scheduling.history_texts import Said, said

RULE_TEXT = {
    "fair-share": gettext_noop("queue %(level)s held more than its fair share"),
    "reclaim-within-deserved": gettext_noop("queue %(level)s was over its deserved quota and the taker stays "
                                            "within its own"),
    "priority": gettext_noop("a job of higher priority in queue %(level)s needed the GPUs"),
    "consolidation": gettext_noop("moved to free whole GPUs for a waiting job"),
    "reduce-cost": gettext_noop("it gave back GPUs it had borrowed over its queue's quota"),
    "node-lost": gettext_noop("its node was lost"),
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
    taker = (said(gettext_noop("job %(job)s in queue %(queue)s"), job=by_job, queue=by_queue) if by_job and by_queue
             else said(gettext_noop("a job in queue %(queue)s"), queue=by_queue) if by_queue else None)
    if taker and why:
        return said(gettext_noop("taken by %(taker)s: %(why)s"), taker=taker, why=why)
    return said(gettext_noop("taken by %(taker)s"), taker=taker) if taker else why
