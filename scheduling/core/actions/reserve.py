"""Reserve: nodes held for whole-GPU gangs that waited too long while smaller jobs backfilled ahead of
them (Slurm's backfill reservation), so that the GPUs freed there add up to the gang instead of going
to the next small job.

Runs before allocate. A job qualifies once it has been pending for `Snapshot.backfill_patience_s` since
its submission (None: never), within its queues' limits and quota, asking for whole GPUs, with no topology
or deadline of its own. Qualifying jobs are taken in job order (priority, then submitted first): one that
fits now is left to allocate, which places it in its turn; for one that does not, the nodes of one of its pools that hold it whole and
have the most free GPUs are held (`Session.reserved`): no other job is placed on them in this cycle,
by any action. The reservation is made again each cycle from the snapshot, so nothing is kept between
cycles and a replay sees what the cycle does.
"""

from __future__ import annotations

import numpy as np

from ..session import Session
from ..state import JobState
from .allocate import CAPACITY, NoFitCache, allocate_block, would_place
from .gang import plan

# jobs that may hold nodes at once: the first ones in job order (Slurm tests a bounded number too)
MAX_RESERVATIONS = 8


def qualifies(s: Session, state: JobState, patience: float) -> bool:
    job = state.job
    if not state.pending or state.evicted or job.topology is not None or job.latest_start is not None:
        return False
    if s.snapshot.now - job.created < patience:
        return False
    return all(r.request.mode == "exclusive" and r.request.num_gpus > 0 for r in job.roles)


def reserve(s: Session) -> None:
    patience = s.snapshot.backfill_patience_s
    if patience is None:
        return
    # (`wanting`: jobs below their gang minimum at the build, in `order`; a job evicted since does not qualify)
    waiting = [state for state in s.wanting if qualifies(s, state, patience)]
    passes = Passes(s)
    for state in waiting:
        if len(s.reserved) >= MAX_RESERVATIONS:
            break
        if passes.over(state):
            continue      # held by its quota or off-peak; or it fits now, and allocate places it in its turn
        rows = rows_to_hold(s, state)
        if rows:
            hold(s, state.job.id, rows)
            passes.held()


class Passes:
    """Whether a waiting job is passed over (`allocate_block` holds it, or it would be placed now), asked once
    per kind of job: thousands may qualify. Nothing reserve tries is kept, so capacity and quotas stay as they
    were for the whole loop, and only holding nodes changes where jobs fit (`held`). Jobs with nothing running
    share their plan (`gang.plan`), so their quota answer is the same for the same plan, queue and
    preemptibility; jobs of one gang signature fit or fail together. An exact session asks every job."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.cache = NoFitCache({})
        self.blocks: dict[tuple, object] = {}   # (plan, queue, preemptible) -> its block
        self.fits: dict[tuple, bool] = {}       # signature -> placed, since nodes were last held

    def over(self, state: JobState) -> bool:
        s, job = self.s, state.job
        if state.replicas or s.exact:
            block = allocate_block(s, state, self.cache)
        else:
            key = (id(plan(s, state)), job.queue, job.preemptible)
            block = self.blocks.get(key, self)
            if block is self:
                block = self.blocks[key] = allocate_block(s, state, self.cache)
        if block not in (None, CAPACITY):
            return True
        if s.exact:   # the reference for tests: every job asked
            return would_place(s, state)
        sig = plan(s, state).sig
        placed = self.fits.get(sig)
        if placed is None:
            placed = self.fits[sig] = would_place(s, state)
        return placed

    def held(self) -> None:
        self.fits.clear()


def rows_to_hold(s: Session, state: JobState) -> tuple[int, ...]:
    """The nodes of one of the job's pools that hold its missing replicas whole once free: the fewest,
    those with the most GPUs free now first (their running work has the least left to give back)."""
    p = plan(s, state)
    pools = None
    for role in p.roles:
        serving = set(p.pools[role.name])
        pools = serving if pools is None else pools & serving
    taken = np.zeros(s.arrays.size, dtype=bool)
    for rows in s.reserved.values():
        taken[list(rows)] = True
    free = s.arrays.fully_free().sum(axis=1)
    for pool in p.pools[p.roles[0].name]:
        if pool not in (pools or ()):
            continue
        candidates = np.flatnonzero(s.pool_mask[pool] & ~taken)
        order = sorted(candidates, key=lambda row: (-int(free[row]), -int(s.arrays.num_gpus[row]), int(row)))
        needs = [(role.request.num_gpus, len(p.missing[role.name])) for role in p.roles]
        chosen: list[int] = []
        for row in order:
            left = int(s.arrays.num_gpus[row])
            used = False
            for i, (gpus, count) in enumerate(needs):
                fit = min(count, left // gpus)
                if fit:
                    needs[i] = (gpus, count - fit)
                    left -= fit * gpus
                    used = True
            if used:
                chosen.append(int(row))
            if all(count == 0 for _, count in needs):
                return tuple(sorted(chosen))
    return ()


def hold(s: Session, job_id: str, rows: tuple[int, ...]) -> None:
    """Keep every other placement off `rows` for the rest of the session."""
    s.reserved[job_id] = rows
    off = np.ones(s.arrays.size, dtype=bool)
    off[list(rows)] = False
    # new masks: the session's came from a cache other sessions share
    s.pool_mask = {name: mask & off for name, mask in s.pool_mask.items()}
    s._masks.clear()
    s._free_milli.clear()
