"""What a session holds per replica (`Assignment`) and per job (`JobState`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .model import Job, Slice
from .reasons import Reason


class Assignment(NamedTuple):
    """Where one replica runs and what it holds there. (A named tuple: a cycle makes tens of
    thousands, and a frozen dataclass costs three times as much to make.)"""

    row: int                                  # row in the session's arrays
    gpus: tuple[int, ...]
    slice: Slice
    cpu_milli: int
    mem_mib: int

    @property
    def gpu_milli(self) -> int:
        """The GPU share this replica holds, for queue accounting."""
        return self.slice.gpu_milli * len(self.gpus)


@dataclass(slots=True)
class JobState:
    job: Job
    running: dict[str, set[int]]              # role name -> replica indices assigned now
    min_milli: int                            # GPU milli of the gang minimum
    fail: tuple[str, Reason | None] | None = None   # (kind, reason) of the last failed attempt
    version: int = 0                          # bumped whenever a replica of the job is (un)bound
    plan: object = None                       # actions' cached view of what is missing
    plan_version: int = -1                    # the version `plan` was made for
    pending: bool = True                      # below the gang minimum
    elastic: bool = False                     # some role runs above its minimum
    grows: bool = False                       # at its minimum or above, and some role below its maximum
    extra: int = 0                            # replicas running above the minimums
    evicted: int = 0                          # replicas of the snapshot evicted in this session
    held: int = 0                             # GPU milli its replicas hold now
    replicas: int = 0                         # replicas assigned now (kept by `refresh`)
    units: dict | None = None                 # actions.evicting.victim_units' for it: reason -> (version, rank, units)

    def np_milli(self, held: int) -> int:
        """What `held` milli count against non-preemptible quota: a non-preemptible job's gang
        minimum; the elastic replicas above it may be reclaimed, so they count as preemptible."""
        return 0 if self.job.preemptible else min(held, self.min_milli)

    def missing(self) -> dict[str, list[int]]:
        """Per role, the replica indices still needed to reach the gang minimum."""
        out = {}
        for role in self.job.roles:
            have = self.running[role.name]
            need = role.min_replicas - len(have)
            if need > 0:
                free = [i for i in range(role.max_replicas) if i not in have]
                out[role.name] = free[:need]
        return out

    def wanted(self) -> dict[str, list[int]]:
        """What the job asks for next: the replicas missing to its gang minimum, or else one replica
        above it (of the role with the fewest above its minimum, its lowest free index); {} at the
        maximum. Elastic replicas are placed one at a time, as KAI-Scheduler allocates them."""
        if self.pending:
            return self.missing()
        if not self.grows:
            return {}
        best = None
        for role in self.job.roles:
            have = self.running[role.name]
            if len(have) < role.max_replicas and (best is None or len(have) - role.min_replicas < best[0]):
                best = (len(have) - role.min_replicas, role)
        role = best[1]
        have = self.running[role.name]
        return {role.name: [next(i for i in range(role.max_replicas) if i not in have)]}

    def wants(self) -> bool:
        """Below its gang minimum, or elastic with room to grow."""
        return self.pending or self.grows

    def is_pending(self) -> bool:
        """Below the gang minimum (kept up to date by the session on every bind and unbind)."""
        return self.pending

    def refresh(self) -> None:
        pending = elastic = room = False
        extra = total = 0
        for r in self.job.roles:
            n = len(self.running[r.name])
            total += n
            if n < r.min_replicas:
                pending = True
            elif n > r.min_replicas:
                elastic = True
                extra += n - r.min_replicas
            if n < r.max_replicas:
                room = True
        self.pending, self.elastic, self.grows, self.extra = pending, elastic, room and not pending, extra
        self.replicas = total

    def extras(self) -> list[tuple[str, int]]:
        """Running replicas above each role's minimum, highest index first (shrunk first)."""
        out: list[tuple[str, int]] = []
        if not self.elastic:
            return out
        for role in self.job.roles:
            have = sorted(self.running[role.name], reverse=True)
            out += [(role.name, i) for i in have[: max(0, len(have) - role.min_replicas)]]
        return out
