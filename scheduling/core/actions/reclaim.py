"""Reclaim: a queue within its share takes GPUs back from queues over theirs."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import chain

from ..model import EvictCause, Job
from ..session import Session
from ..state import JobState
from .evicting import Unit, reclaim_can_lift, run_eviction_action, victim_units
from .gang import EPS, missing_milli, plan, within_quota


def reclaim(s: Session) -> None:
    """A queue within its share takes GPUs back from another queue, by one of two rules (those of
    KAI-Scheduler's proportion plugin), weighed where the two queues' branches of the tree meet:

    - fair-share: the other side holds more than its share (before this eviction; a job is never
      split, so the last one taken may leave it below);
    - reclaim-within-deserved: the other side holds more than its deserved quota and the taker's
      side stays within its own.

    A queue's share here is what it may hold (`Session.allocatable`): its fair share, or its deserved
    quota where that is more (deserved quotas that over-commit the cluster are scaled down in the fair
    share, but a queue may still reclaim up to its quota from one over its own).

    The taker's queue must end within its share once the victims are gone. An ancestor of it may end
    over its own share only while it stays less full (held / share) than every sibling of it that lost
    victims, as KAI-Scheduler weighs departments: victims are taken from the fuller side only."""
    if not reclaim_may_help(s):
        return
    walk = ReclaimWalk(s, victim_units(s, "reclaim"))
    run_eviction_action(s, {"capacity", "quota"}, walk.prepare, walk.never)


class ReclaimWalk:
    """What reclaim's visits share: the victims per queue, and the queues each leaf may take from."""

    def __init__(self, s: Session, units: dict[str, list[Unit]]) -> None:
        self.s, self.units = s, units
        self.victim_order = victim_order({q for q in units if s.alloc[q] > s.allocatable.get(q, 0.0) + EPS})
        self.sides: dict[tuple[str, str], tuple[str, str]] = {}
        # the queues a leaf may take `need` from: the same for every job of that leaf and need until
        # some queue's usage changes (`Session.stamp`), so kept for that long
        self.found: dict[tuple, list[str]] = {}
        self.found_at: tuple[int, int] | None = None
        self.weighed: dict[str, list[tuple[str, list[str]]]] = {}
        self.children: dict[str | None, list[str]] | None = None
        self.merged: dict[tuple[str, ...], list[Unit]] = {}

    def lenders_for(self, leaf: str, need: int) -> list[str]:
        s = self.s
        at = (s.stamp, s.freed)
        if self.found_at != at:
            self.found.clear()
            self.found_at = at
        key = (leaf, need)
        lenders = self.found.get(key)
        if lenders is None:
            sides = self.sides
            lenders = self.found[key] = [q for q in self.units
                                         if q != leaf and reclaim_rule(s, sides, leaf, q, need) is not None]
        return lenders

    def siblings_weighed(self, leaf: str) -> list[tuple[str, list[str]]]:
        """Each ancestor of `leaf` with its siblings: the pairs whose fullness `saturation_holds` weighs.
        (The leaf itself never ends over its share, so it is not weighed.)"""
        found = self.weighed.get(leaf)
        if found is None:
            s = self.s
            if self.children is None:
                self.children = {}
                for name, q in s.queues.items():
                    self.children.setdefault(q.parent, []).append(name)
            found = self.weighed[leaf] = [(q, [o for o in self.children[s.queues[q].parent] if o != q])
                                          for q in s.queue_path[leaf][1:]]
        return found

    def prepare(self, state: JobState):
        s, job = self.s, state.job
        if not reclaim_can_lift(state):
            return None
        need = missing_milli(s, state)
        leaf = job.queue
        if s.alloc[leaf] + need > s.allocatable.get(leaf, 0.0) + EPS:
            return None
        lenders = self.lenders_for(leaf, need)
        if not lenders:
            return None
        weighed = self.siblings_weighed(leaf)
        before = {o: s.alloc[o] for _, others in weighed for o in others}

        def final_check() -> bool:
            return (within_quota(s, job) and s.alloc[leaf] <= s.allocatable.get(leaf, 0.0) + EPS
                    and saturation_holds(s, weighed, before))

        return self.victims_of(lenders), reclaim_causes(s, self.sides, job, need), final_check, asked_as(s, leaf, need)

    def victims_of(self, lenders: list[str]) -> list[Unit]:
        """The units of `lenders` in the order they go. The units are fixed for the walk (those gone stale
        are skipped when used), so each set of lenders is merged once: each queue's units are in that order
        already, and a sort of runs merges them in C (no two units order alike, so it is the lazy merge's
        order)."""
        key = tuple(lenders)
        found = self.merged.get(key)
        if found is None:
            units = self.units
            found = self.merged[key] = sorted(chain.from_iterable(units[q] for q in lenders), key=self.victim_order)
        return found

    def never(self, state: JobState) -> bool:
        # `waits_whole` and `reclaim_can_lift`'s common case inline: a call per waiting job
        if state.replicas:
            return False
        fail = state.fail
        if fail is not None and fail[0] == "quota" and not reclaim_can_lift(state):
            return True
        # a queue's usage is never negative: a job asking more than its queue's share never reclaims
        p = state.plan if state.plan_version == state.version else plan(self.s, state)
        return p.need > self.s.allocatable.get(state.job.queue, 0.0) + EPS


def asked_as(s: Session, leaf: str, need: int) -> tuple:
    """What `reclaim_rule` reads of the taker (`leaf`, asking `need`) while its victims are counted off:
    a leaf at the top of the tree is its own side against every other queue, and evicting others never
    changes its usage, so only whether it stays within its deserved quota counts; elsewhere, the leaf and
    its need."""
    if len(s.queue_path[leaf]) == 1:
        return "top", s.alloc[leaf] + need <= s.deserved.get(leaf, 0.0) + EPS
    return "leaf", leaf, need


def saturation_holds(s: Session, weighed: list[tuple[str, list[str]]], before: dict[str, float]) -> bool:
    """Whether every queue of `weighed` that is now over its share is less full (held / share) than
    each of its siblings that lost work since `before` (a sibling with no share is not weighed)."""
    for queue, others in weighed:
        mine, held = s.allocatable.get(queue, 0.0), s.alloc[queue]
        if held <= mine + EPS:
            continue
        ratio = held / mine if mine > EPS else math.inf
        for other in others:
            now = s.alloc[other]
            if now >= before[other] - EPS:
                continue
            theirs = s.allocatable.get(other, 0.0)
            if theirs > EPS and ratio >= now / theirs:
                return False
    return True


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
    whose queue could take what it asks for within its share. When none may, every visit would pass,
    so the action is left out (a scan of the jobs instead)."""
    kinds = ("capacity", "quota")
    # a queue already over its share takes nothing whatever its jobs ask (most waiting jobs: best-effort
    # queues with no share), so their plans are not looked up
    over: dict[str, bool] = {}
    for state in s.wanting:
        fail = state.fail
        if fail is None or fail[0] not in kinds or not (state.pending or state.grows) or state.evicted:
            continue
        queue = state.job.queue
        full = over.get(queue)
        if full is None:
            full = over[queue] = s.alloc[queue] > s.allocatable.get(queue, 0.0) + EPS
        if full or not reclaim_can_lift(state):
            continue
        if s.alloc[queue] + missing_milli(s, state) <= s.allocatable.get(queue, 0.0) + EPS:
            return True
    return False


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
    if held > s.allocatable.get(giver, 0.0) + EPS:
        return "fair-share", giver
    if held > s.deserved.get(giver, 0.0) + EPS and s.alloc[taker] + need <= s.deserved.get(taker, 0.0) + EPS:
        return "reclaim-within-deserved", giver
    return None
