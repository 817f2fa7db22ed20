"""Placing a gang that asks for topology (`Job.topology`): within one domain of the lowest level that
holds it, else (`preferred` only) within the fewest domains of the level asked; and why a `required`
gang waits. Jobs without topology never come here (`gang.place_gang`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..model import Topology
from ..reasons import Reason
from ..session import Session
from ..state import JobState
from ..topology import Domains, domain_room, resolve_level
from ..units import MILLI_PER_GPU

if TYPE_CHECKING:
    from .gang import Plan

# How long a `preferred` gang waits for one domain before it spills into several, in seconds since it was
# submitted: on a busy cluster one domain rarely has room the moment a gang comes first, but often does
# a few cycles later, while the work behind it backfills the GPUs it leaves free.
PREFERRED_WAIT_S = 600.0

# Domains tried per level, best fitting first: each try places the whole gang, and a domain whose free
# figures allow the gang rarely fails for another reason.
MAX_TRIES = 4

Attempt = Callable[[np.ndarray | None], bool]   # place the gang on these rows (None: anywhere), or not


def domains_of(s: Session, topology: Topology, pools: Iterable[str]) -> tuple[Domains, int] | None:
    """The domains for the job's level in its pools, and the level's index; None when no pool has it."""
    found = resolve_level((s.pools[p] for p in pools), topology.level)
    if found is None:
        return None
    keys, level = found
    return s.domains(keys), level


def room(s: Session, p: Plan, pools: Iterable[str]) -> tuple[np.ndarray, float]:
    """What each row could take of the gang (float64 [N], 0 outside its pools) and what the gang needs, in
    the same unit: replicas for one role of whole GPUs (a node's fully free GPUs divided by the replica's),
    else GPU milli."""
    mask = s.pools_mask(pools)
    arr = s.arrays
    if len(p.roles) == 1 and p.roles[0].request.mode == "exclusive" and p.roles[0].request.num_gpus > 0:
        per = p.roles[0].request.num_gpus
        free = _whole_free(s) // per
        return np.where(mask, free, 0).astype(np.float64), float(len(p.missing[p.roles[0].name]))
    return np.where(mask, arr.gpu_free_milli.sum(axis=1), 0).astype(np.float64), float(p.need)


def _whole_free(s: Session) -> np.ndarray:
    """Fully free GPUs per row, until capacity is taken or given back."""
    found = s.memo.get("topology_whole")
    if found is None or found[0] != s.stamp:
        found = s.memo["topology_whole"] = (s.stamp, s.arrays.fully_free().sum(axis=1))
    return found[1]


def _anchor(s: Session, state: JobState, ids: np.ndarray) -> int | None:
    """The domain (of `ids`' level) of the job's first running replica: where the rest must go."""
    for role, indices in state.running.items():
        for index in sorted(indices):
            found = int(ids[s.assign[(state.job.id, role, index)].row])
            return found if found >= 0 else None
    return None


def best_fit(ids: np.ndarray, count: int, free: np.ndarray, need: float, inside: np.ndarray | None = None) -> list[int]:
    """Domains whose room holds `need`, the least room first (big free domains stay for big gangs)."""
    per = domain_room(ids, free, count, inside)
    fitting = np.flatnonzero(per >= need)
    order = np.lexsort((fitting, per[fitting]))
    return fitting[order][:MAX_TRIES].tolist()


def fewest(ids: np.ndarray, count: int, free: np.ndarray, need: float, inside: np.ndarray | None = None
           ) -> np.ndarray | None:
    """The rows of the fewest domains whose room together holds `need` (the roomiest first); None when all
    of them do not."""
    per = domain_room(ids, free, count, inside)
    order = np.lexsort((np.arange(count), -per))
    total = np.cumsum(per[order])
    enough = np.flatnonzero(total >= need)
    if not len(enough):
        return None
    rows = np.isin(ids, order[: int(enough[0]) + 1])
    return rows if inside is None else rows & inside


def place_in_topology(s: Session, state: JobState, p: Plan, pools: set[str], attempt: Attempt) -> bool:
    """Place the gang by its topology: `attempt(rows)` places it on those rows, all or nothing."""
    topology = state.job.topology
    found = domains_of(s, topology, pools)
    if found is None:
        return False if topology.required else attempt(None)
    domains, level = found
    ids = domains.ids[level]
    free, need = room(s, p, pools)
    anchor = _anchor(s, state, ids) if state.replicas else None
    if state.replicas:
        if anchor is not None and attempt(ids == anchor):
            return True
        if topology.required:
            return False
    else:
        # one domain: of the lowest declared level that holds the gang, up to the level asked
        for lower in range(max(level, domains.node_level - 1), level - 1, -1):
            lower_ids = domains.ids[lower]
            for domain in best_fit(lower_ids, len(domains.names[lower]), free, need):
                if attempt(lower_ids == domain):
                    return True
        if topology.required or waits_for_one_domain(s, state):
            return False
    # preferred: the fewest domains of the level, within one domain of a level above if one holds them
    count = len(domains.names[level])
    for upper in range(level - 1, -1, -1):
        upper_ids = domains.ids[upper]
        for domain in best_fit(upper_ids, len(domains.names[upper]), free, need):
            rows = fewest(ids, count, free, need, upper_ids == domain)
            if rows is not None and attempt(rows):
                return True
    rows = fewest(ids, count, free, need)
    if rows is not None and attempt(rows):
        return True
    return attempt(None)


def waits_for_one_domain(s: Session, state: JobState) -> bool:
    """Whether a `preferred` gang with nothing running still waits for one domain (`PREFERRED_WAIT_S`)."""
    topology = state.job.topology
    return (topology is not None and not topology.required and not state.replicas
            and s.snapshot.now - state.job.created < PREFERRED_WAIT_S)


def topology_key(s: Session, state: JobState) -> tuple | None:
    """What of a job's topology decides where it may go now: its topology, and whether it still waits for
    one domain. Jobs with equal keys (and roles) fit or fail together."""
    topology = state.job.topology
    return None if topology is None else (topology, waits_for_one_domain(s, state))


def topology_reason(s: Session, state: JobState, p: Plan, pools: set[str]) -> Reason:
    """Why a `required` gang waits: the GPUs it needs within one domain, and the largest free domain (the
    job's own domain when some of it runs)."""
    topology = state.job.topology
    found = domains_of(s, topology, pools)
    if found is None:
        return Reason("topology_level_unknown", {"level": topology.level, "pools": sorted(pools)})
    domains, level = found
    ids = domains.ids[level]
    names = domains.names[level]
    mask = s.pools_mask(pools)
    whole = all(r.request.mode == "exclusive" for r in p.roles)
    per_row = _whole_free(s) * MILLI_PER_GPU if whole else s.arrays.gpu_free_milli.sum(axis=1)
    anchor = _anchor(s, state, ids) if state.replicas else None
    inside = mask if anchor is None else mask & (ids == anchor)
    per = domain_room(ids, np.where(inside, per_row, 0).astype(np.float64), len(names), inside)
    if not (ids[mask] >= 0).any():
        return Reason("topology_level_unknown", {"level": topology.level, "pools": sorted(pools)})
    best = anchor if anchor is not None else int(np.lexsort((np.arange(len(per)), -per))[0])
    return Reason("topology_no_domain", {"level": topology.level, "need_milli": int(p.need),
                                         "domain": names[best], "free_milli": int(per[best])})


def required_rows(s: Session, state: JobState, pools: Iterable[str], old_row: int | None = None) -> np.ndarray | None:
    """Where one more replica of a job whose topology is `required` may go: the domain of its running
    replicas, else the domain of `old_row` (where a moved replica was), else any row in a domain of its level
    (no row when no pool has the level). None for a job without a required topology: anywhere."""
    topology = state.job.topology
    if topology is None or not topology.required:
        return None
    found = domains_of(s, topology, pools)
    if found is None:
        return np.zeros(s.arrays.size, dtype=bool)
    domains, level = found
    ids = domains.ids[level]
    anchor = _anchor(s, state, ids) if state.replicas else None
    if anchor is None and old_row is not None and ids[old_row] >= 0:
        anchor = int(ids[old_row])
    return ids == anchor if anchor is not None else ids >= 0
