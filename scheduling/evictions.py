"""Why a replica was evicted, in words a tenant reads on the job page and in the API: who took
its GPUs, which queue's share was weighed, and the rule applied (the core's Evict cause)."""

from __future__ import annotations

from scheduling.core import model as cm

RULE_TEXT = {
    "fair-share": "queue {level} held more than its fair share",
    "reclaim-within-deserved": "queue {level} was over its deserved quota and the taker stays within its own",
    "priority": "a job of higher priority in queue {level} needed the GPUs",
    "consolidation": "moved to free whole GPUs for a waiting job",
    "reduce-cost": "it gave back GPUs it had borrowed over its queue's quota",
    "node-lost": "its node was lost",
}


def eviction_cause(evict: cm.Evict, *, same_workspace: bool) -> dict[str, str]:
    """The cause as event data. The taking job is named only within the victim's own workspace:
    another tenant's job stays anonymous, its queue (cluster-wide, like quotas) does not."""
    return {"by_job": evict.by_job if same_workspace else "", "by_queue": evict.by_queue,
            "level": evict.level, "rule": evict.rule}


def explain(cause: dict[str, str]) -> str:
    """One sentence: "taken by job 42 in queue team-a: queue team-b held more than its fair share"."""
    rule = RULE_TEXT.get(cause.get("rule", ""), "")
    why = rule.format(level=cause.get("level") or cause.get("by_queue") or "?")
    by_job, by_queue = cause.get("by_job"), cause.get("by_queue")
    taker = (f"job {by_job} in queue {by_queue}" if by_job and by_queue
             else f"a job in queue {by_queue}" if by_queue else "")
    if taker and why:
        return f"taken by {taker}: {why}"
    return f"taken by {taker}" if taker else why
