"""The walk every action shares: jobs that want replicas visited in fair order (`fair_walk`: the
queue tree from the top, weighed as KAI-Scheduler's proportion plugin weighs it), and when it may
stop early (`Quiet`)."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable

from ..model import Job
from ..session import Session
from ..state import JobState
from .gang import EPS, plan

STOP = object()          # returned by a fair_walk visitor that wants no more jobs
AGAIN = object()         # returned by a fair_walk visitor whose job grew and asks for more


def job_order(state: JobState) -> tuple:
    """A job's place in its queue (KAI-Scheduler's job order): higher priority first; then jobs below
    their gang minimum, then elastic jobs with the fewest replicas above it (so that spare room is
    shared round-robin); then the job submitted first."""
    job = state.job
    return (-job.priority, 0 if state.pending else 1 + state.extra, job.created, job.id)


def queue_weights(s: Session, queue: str) -> tuple[float, float, int, float]:
    """What `queue_order` weighs a queue's usage against: its fair share and deserved quota (each
    with EPS), minus its priority, and its allocatable share (`Session.allocatable`). Fixed for a
    session."""
    q = s.queues[queue]
    return s.fair_share.get(queue, 0.0) + EPS, q.deserved_milli + EPS, -q.priority, s.allocatable[queue]


def queue_order(alloc: float, need: float, weights: tuple[float, float, int, float], job: Job) -> tuple:
    """Where a queue holding `alloc` stands among its siblings for placing `job` (the first job under
    it, asking `need`), as KAI-Scheduler's proportion plugin orders queues: within its fair share
    before over it; within its deserved quota with the job added before not; higher queue priority;
    a queue with no allocatable share last; the smaller share of its allocatable share with the job
    added, then without it; the smaller allocatable share; then the job submitted first."""
    fair, deserved, rank, cap = weights
    with_job = alloc + need
    if cap > EPS:
        return alloc > fair, with_job > deserved, rank, False, with_job / cap, alloc / cap, cap, job.created, job.id
    return alloc > fair, with_job > deserved, rank, with_job > EPS, with_job, alloc, cap, job.created, job.id


def pending_by_queue(s: Session, kinds: Iterable[str | None] | None = None) -> dict[str, list[JobState]]:
    """Jobs that want replicas (whose last failure is of one of `kinds`, if given) per queue: those below
    their gang minimum and elastic jobs below their maximum. A job evicted in this cycle waits for the
    next one."""
    out: dict[str, list[JobState]] = {}
    allowed = set(kinds) if kinds is not None else None
    for state in s.wanting:
        if (state.pending or state.grows) and not state.evicted and (
                allowed is None or (state.fail[0] if state.fail else None) in allowed):
            jobs = out.get(state.job.queue)
            if jobs is None:
                jobs = out[state.job.queue] = []
            jobs.append(state)
    return out


def fair_walk(s: Session, by_queue: dict[str, list[JobState]], visit: Callable[[JobState], object],
              quiet: Quiet | None = None) -> None:
    """Visit jobs in fair order, as KAI-Scheduler pops them: from the top of the queue tree down, at
    each level the queue that comes first by `queue_order` (weighed with the first job under it),
    then that leaf's first job by `job_order`. After each visit the queues on its path are weighed
    again; after an eviction, all of them. `visit` returns STOP to end the walk, or AGAIN to put the
    job back in its queue (it grew by a replica and asks for another). With `quiet` (not in an exact
    session) the walk ends as soon as no job left to visit could change anything: `quiet` then does
    for those jobs what their visits would have done."""
    if s.exact:
        quiet = None
    queued = {q: in_job_order(states) for q, states in by_queue.items() if states}
    if not queued:
        return
    if quiet is not None:
        quiet.add_all(queued.values())
    order = FairOrder(s, queued)
    version = None
    while True:
        if version != s.freed:
            order.rebuild()
            version = s.freed
        if not order.heaps[None]:
            return
        if quiet is not None and quiet.due() and quiet.settled():
            quiet.finish()
            return
        path, state = order.pop()
        if quiet is not None:
            quiet.remove(state)
        result = visit(state)
        if result is STOP:
            return
        if result is AGAIN:
            order.put_back(path[-1][1], state)
            if quiet is not None:
                quiet.add(state)
        order.reweigh(path)


def in_job_order(states: list[JobState]) -> list[JobState]:
    """A queue's jobs by job_order. They come in `Session.order`, which is job_order for jobs below
    their minimum; the others (elastic jobs that may grow) are put in their places."""
    entries = [st for st in states if st.pending]
    if len(entries) < len(states):
        for st in sorted((st for st in states if not st.pending), key=job_order):
            bisect.insort(entries, st, key=job_order)
    return entries


class FairOrder:
    """A walk's queue tree as heaps: under each parent (None: the root) its children by `queue_order`,
    and each leaf's jobs (`queued`, by job_order) from `head[leaf]` on."""

    def __init__(self, s: Session, queued: dict[str, list[JobState]]) -> None:
        self.s, self.queued = s, queued
        self.head = dict.fromkeys(queued, 0)
        kids: dict[str | None, list[str]] = {None: []}
        for leaf in queued:
            path = s.queue_path[leaf]
            for child, parent in zip(path, (*path[1:], None), strict=True):
                siblings = kids.setdefault(parent, [])
                if child in siblings:
                    break
                siblings.append(child)
        self.kids = kids
        # parents deepest first, the root (None) last: a node's key needs its children's heaps
        self.parents = sorted(kids, key=lambda p: -len(s.queue_path[p]) if p is not None else 0)
        self.weights = {q: queue_weights(s, q) for q in (*queued, *(p for p in kids if p is not None))}
        self.heaps: dict[str | None, list] = {}

    def weighed(self, name: str) -> tuple | None:
        """(queue_order key, name) for a node's heap entry; None when nothing is left under it."""
        queued, heaps = self.queued, self.heaps
        leaf = name
        while leaf not in queued:
            below = heaps.get(leaf)
            if not below:
                return None
            leaf = below[0][1]
        entries, at = queued[leaf], self.head[leaf]
        if at >= len(entries):
            return None
        state = entries[at]
        need = state.plan.need if state.plan_version == state.version else plan(self.s, state).need
        return queue_order(self.s.alloc[name], need, self.weights[name], state.job), name

    def rebuild(self) -> None:
        """Every node weighed again (after an eviction)."""
        heaps, kids, weighed = self.heaps, self.kids, self.weighed
        for parent in self.parents:
            heap = [entry for entry in map(weighed, kids[parent]) if entry is not None]
            heapq.heapify(heap)
            heaps[parent] = heap

    def pop(self) -> tuple[list[tuple[list, str]], JobState]:
        """The first job, taken off its leaf, and the path down to it: (heap, node) per level, each node
        popped off its heap (`reweigh` puts them back)."""
        heap, queued = self.heaps[None], self.queued
        path = []
        while True:
            name = heapq.heappop(heap)[1]
            path.append((heap, name))
            if name in queued:
                break
            heap = self.heaps[name]
        at = self.head[name]
        self.head[name] = at + 1
        return path, queued[name][at]

    def put_back(self, leaf: str, state: JobState) -> None:
        """A job just visited goes back among its leaf's jobs left, in its place by job_order."""
        bisect.insort(self.queued[leaf], state, lo=self.head[leaf], key=job_order)

    def reweigh(self, path: list[tuple[list, str]]) -> None:
        """The nodes of a path `pop` took, weighed again and pushed back, the deepest first."""
        for heap, node in reversed(path):
            entry = self.weighed(node)
            if entry is not None:
                heapq.heappush(heap, entry)


class Quiet:
    """When a walk may stop early. Most jobs an action walks cannot be served (the same shapes fail
    again and again), and visiting each in fair order costs more than the rest of the cycle; but the
    order matters only up to the last visit that changes something. So the jobs still to visit are
    counted by group (`group`: everything their visit depends on besides the session's state), and
    from time to time (`due`, at doubling gaps) `quiet` asks whether a visit of any group would now
    change anything but its own job's `fail`. When none would, nothing changes any more: the walk
    stops and `finish` records for each job left what its visit would have recorded. The decisions
    are those of visiting every job (`Session.exact`; tests compare the two)."""

    FIRST_GAP = 8

    def __init__(self, s: Session) -> None:
        self.s = s
        self.members: dict[tuple, dict[str, JobState]] = {}   # group -> its jobs left to visit, by id
        self.where: dict[str, tuple] = {}          # job id -> (group, job version) it is counted under
        self.seen = len(s.touched)
        self.wait = 0
        self.gap = self.FIRST_GAP

    def group(self, state: JobState) -> tuple:
        raise NotImplementedError

    def effective(self) -> bool:
        """Whether visiting some job left (of a group with a count) could change anything now."""
        raise NotImplementedError

    def record(self, g: tuple, states: Iterable[JobState]) -> None:
        """Do what visiting these jobs of group `g` now would do, knowing it changes nothing else."""

    def add(self, state: JobState) -> None:
        g = self.group(state)
        members = self.members.get(g)
        if members is None:
            members = self.members[g] = {}
            self.created(g, state)
        members[state.job.id] = state
        self.where[state.job.id] = (g, state.version)

    def add_all(self, lists: Iterable[list[JobState]]) -> None:
        """`add` for every job of these lists (the walk's start: thousands of jobs)."""
        members_of, where, group, created = self.members, self.where, self.group, self.created
        for states in lists:
            for state in states:
                g = group(state)
                members = members_of.get(g)
                if members is None:
                    members = members_of[g] = {}
                    created(g, state)
                job_id = state.job.id
                members[job_id] = state
                where[job_id] = (g, state.version)

    def remove(self, state: JobState) -> None:
        job_id = state.job.id
        g = self.where.pop(job_id)[0]
        members = self.members[g]
        del members[job_id]
        if not members:
            del self.members[g]
            self.forget(g)

    def created(self, g: tuple, state: JobState) -> None:
        """Group `g` was made for `state`, its first job."""

    def forget(self, g: tuple) -> None:
        """Group `g` has no job left (its key may be used again for another)."""

    def refresh(self) -> None:
        """Jobs left whose replicas changed since they were counted (victims) move to their group now."""
        touched, jobs, where = self.s.touched, self.s.jobs, self.where
        for job_id in touched[self.seen:]:
            found = where.get(job_id)
            if found is not None and found[1] != jobs[job_id].version:
                self.remove(jobs[job_id])
                self.add(jobs[job_id])
        self.seen = len(touched)

    def rep(self, g: tuple) -> JobState:
        """A job left in group `g`."""
        return next(iter(self.members[g].values()))

    def due(self) -> bool:
        if self.wait > 0:
            self.wait -= 1
            return False
        return True

    def settled(self) -> bool:
        self.refresh()
        if not self.effective():
            return True
        self.wait, self.gap = self.gap, self.gap * 2
        return False

    def finish(self) -> None:
        """Record for every job left what its visit would have recorded now."""
        for g, members in self.members.items():
            self.record(g, members.values())
