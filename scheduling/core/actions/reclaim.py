"""Reclaim: a queue within its fair share takes GPUs back from queues over theirs."""

from __future__ import annotations

from collections.abc import Callable

from ..model import EvictCause, Job
from ..session import Session
from ..state import JobState
from .evicting import Unit, merged, reclaim_can_lift, run_eviction_action, victim_units, waits_whole
from .gang import EPS, missing_milli, plan, within_quota


def reclaim(s: Session) -> None:
    """A queue within its fair share takes GPUs back from another queue, by one of two rules (those
    of KAI-Scheduler's proportion plugin), weighed where the two queues' branches of the tree meet:

    - fair-share: the other side holds more than its fair share (before this eviction; a job is
      never split, so the last one taken may leave it below);
    - reclaim-within-deserved: the other side holds more than its deserved quota and the taker's
      side stays within its own.

    The taker's queue and every ancestor must end within their fair shares (and limits) once the
    victims are gone; victims under an ancestor that would go over are the only ones that help it."""
    if not reclaim_may_help(s):
        return
    walk = ReclaimWalk(s, victim_units(s, "reclaim"))
    run_eviction_action(s, {"capacity", "quota"}, walk.prepare, walk.never)


class ReclaimWalk:
    """What reclaim's visits share: the victims per queue, and the queues each leaf may take from."""

    def __init__(self, s: Session, units: dict[str, list[Unit]]) -> None:
        self.s, self.units = s, units
        self.victim_order = victim_order({q for q in units if s.alloc[q] > s.fair_share.get(q, 0.0) + EPS})
        self.sides: dict[tuple[str, str], tuple[str, str]] = {}
        # the queues a leaf may take `need` from: the same for every job of that leaf and need until
        # some queue's usage changes (`Session.stamp`), so kept for that long
        self.found: dict[tuple, list[str]] = {}
        self.found_at: tuple[int, int] | None = None

    def lenders_for(self, leaf: str, need: int, scope: str) -> list[str]:
        s = self.s
        at = (s.stamp, s.freed)
        if self.found_at != at:
            self.found.clear()
            self.found_at = at
        key = (leaf, need, scope)
        lenders = self.found.get(key)
        if lenders is None:
            sides = self.sides
            lenders = self.found[key] = [q for q in self.units if q != leaf and (
                scope == ANYWHERE or scope in s.queue_path[q]) and reclaim_rule(s, sides, leaf, q, need) is not None]
        return lenders

    def prepare(self, state: JobState):
        s, job = self.s, state.job
        if not reclaim_can_lift(state):
            return None
        need = missing_milli(s, state)
        scope = victims_scope(s, job.queue, need)
        if scope is None:
            return None
        lenders = self.lenders_for(job.queue, need, scope)
        if not lenders:
            return None

        def final_check() -> bool:
            return within_quota(s, job) and all(s.alloc[q] <= s.fair_share.get(q, 0.0) + EPS
                                                for q in s.queue_path[job.queue])

        units = self.units
        return (merged((units[q] for q in lenders), self.victim_order), reclaim_causes(s, self.sides, job, need),
                final_check)

    def never(self, state: JobState) -> bool:
        if not waits_whole(state):
            return False
        if not reclaim_can_lift(state):
            return True
        # a queue's usage is never negative: a job asking more than its queue's fair share never reclaims
        p = state.plan if state.plan_version == state.version else plan(self.s, state)
        return p.need > self.s.fair_share.get(state.job.queue, 0.0) + EPS


def victim_order(over_own_share: set[str]) -> Callable[[Unit], tuple]:
    """Reclaim's order of victims: lower-priority queues first, then queues over their own share
    (`over_own_share`) before those that are not."""

    def order(unit: Unit) -> tuple:
        return unit.order[0], unit.queue not in over_own_share, unit.order

    return order


def reclaim_causes(s: Session, sides: dict, job: Job, need: int) -> Callable[[Unit], EvictCause | None]:
    """Why a unit may go to make room for `job` (the rule and level of `reclaim_rule`), or None."""
    causes: dict[tuple[str, str], EvictCause] = {}

    def cause_of(unit: Unit) -> EvictCause | None:
        found = reclaim_rule(s, sides, job.queue, unit.queue, need)
        if found is None:
            return None
        cause = causes.get(found)
        if cause is None:
            cause = causes[found] = EvictCause(job.id, job.queue, found[1], found[0])
        return cause

    return cause_of


def reclaim_may_help(s: Session) -> bool:
    """Whether some job `reclaim` walks may take anything: one whose last failure evicting could lift and
    whose queue could take what it asks for within its fair share (`victims_scope`). When none may, every
    visit would pass, so the action is left out (a scan of the jobs instead)."""
    kinds = ("capacity", "quota")
    scope: dict[tuple[str, int], bool] = {}
    for state in s.wanting:
        fail = state.fail
        if fail is None or fail[0] not in kinds or not (state.pending or state.grows) or state.evicted:
            continue
        if not reclaim_can_lift(state):
            continue
        key = (state.job.queue, missing_milli(s, state))
        found = scope.get(key)
        if found is None:
            found = scope[key] = victims_scope(s, key[0], key[1]) is not None
        if found:
            return True
    return False


ANYWHERE = ""   # a victims' scope that is no queue (queue names are never empty)


def victims_scope(s: Session, leaf: str, need: int) -> str | None:
    """The queue whose subtree the victims must come from: the nearest ancestor that would go over
    its fair share by taking `need` (only evictions under it bring it back), else ANYWHERE. None
    when the leaf itself would go over, or when evicting all other preemptible work under some
    ancestor could still not make room in its share."""
    if s.alloc[leaf] + need > s.fair_share.get(leaf, 0.0) + EPS:
        return None
    own_preemptible = s.alloc[leaf] - s.np_alloc[leaf]
    scope = ANYWHERE
    for q in s.queue_path[leaf][1:]:
        share = s.fair_share.get(q, 0.0)
        if s.alloc[q] + need <= share + EPS:
            continue
        freeable = s.alloc[q] - s.np_alloc[q] - own_preemptible
        if s.alloc[q] + need - freeable > share + EPS:
            return None
        scope = scope or q
    return scope


def split_sides(s: Session, cache: dict, mine: str, theirs: str) -> tuple[str, str]:
    """The two queues just below the closest common ancestor of leaves `mine` and `theirs` (the
    level at which their shares are weighed against each other)."""
    found = cache.get((mine, theirs))
    if found is None:
        a, b = s.queue_path[mine][::-1], s.queue_path[theirs][::-1]
        i = 0
        while a[i] == b[i]:
            i += 1
        found = cache[(mine, theirs)] = (a[i], b[i])
    return found


def reclaim_rule(s: Session, cache: dict, mine: str, theirs: str, need: int) -> tuple[str, str] | None:
    """(rule, level) by which leaf `mine` may take `need` from leaf `theirs` now, or None."""
    taker, giver = split_sides(s, cache, mine, theirs)
    held = s.alloc[giver]
    if held > s.fair_share.get(giver, 0.0) + EPS:
        return "fair-share", giver
    if held > s.deserved.get(giver, 0.0) + EPS and s.alloc[taker] + need <= s.deserved.get(taker, 0.0) + EPS:
        return "reclaim-within-deserved", giver
    return None
