"""The scheduling actions, one module each, run in this order: reserve (backfill reservations, when the
snapshot asks for them), allocate, consolidate, reclaim, preempt, elastic (`ACTIONS`).

Each action walks the jobs that want replicas in fair order (`walk.fair_walk`: the queue tree from the
top, weighed as KAI-Scheduler's proportion plugin weighs it) and tries a scenario in a session
transaction; a scenario is kept only if what the job asks for gets placed whole: its gang minimum,
or one elastic replica above it (and, for consolidation, every moved replica fits again). What a job
asks for and placing it are in `gang`; what the evicting actions share, in `evicting`; why the jobs
left pending wait, in `pending`.
"""

from .allocate import allocate
from .consolidate import consolidate
from .elastic import elastic
from .preempt import preempt
from .reclaim import reclaim
from .reserve import reserve

ACTIONS = (reserve, allocate, consolidate, reclaim, preempt, elastic)

__all__ = ["ACTIONS", "allocate", "consolidate", "elastic", "preempt", "reclaim", "reserve"]
