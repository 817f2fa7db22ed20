"""Replica logs that outlast their pods.

Capture: the scheduling cycle reads a replica's log from the backend just before it deletes the pod
(forget or evict) and keeps it as a `ReplicaLog`, once per placement. A job's stored logs hold at most
JOB_LOG_MAX_BYTES: past it the oldest lines are dropped and a marker line says so. Logs older than
JOB_LOG_RETENTION_DAYS are deleted by a beat task.

Reads: a replica that runs (or ended moments ago, before the cycle captured it) is read live from the
backend; otherwise its stored copy. `follow` streams the new lines of every poll while the job runs.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from scheduling import clock, secrets
from scheduling.backends.base import ClusterBackend, ReplicaKey
from scheduling.errors import DomainError
from scheduling.models import ACTIVE_STATES, Job, Replica, ReplicaLog

log = logging.getLogger(__name__)

# `{role}-{index}`: a role is a DNS label (scheduling.spec.read)
REPLICA_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?-[0-9]{1,6}$"
REPLICA_NAME = re.compile(REPLICA_NAME_PATTERN)
# The cycle captures a log right after it records the end; until then the pod still has it.
CAPTURE_GRACE = timedelta(minutes=2)
TEXT_PLAIN = "text/plain; charset=utf-8"


class NoSuchReplica(DomainError):
    status = 404
    title = "Not found"
    field = "replica"


def parse_replica_name(name: str) -> tuple[str, int]:
    """`worker-0` -> ("worker", 0)."""
    if not REPLICA_NAME.fullmatch(name or ""):  # match() would let a trailing newline through `$`
        raise DomainError(f"{name!r} is not a replica name such as worker-0", field="replica")
    role, index = name.rsplit("-", 1)
    return role, int(index)


# --------------------------------------------------------------------------- services


def clean(text: str) -> str:
    """Text a database keeps (PostgreSQL refuses NUL), ending with a newline."""
    text = text.replace("\x00", "")
    return text if not text or text.endswith("\n") else text + "\n"


def fit(text: str, budget: int, cap: int) -> tuple[str, bool]:
    """The text within `budget` bytes: its last whole lines after a marker line, (text, truncated)."""
    data = text.encode()
    if len(data) <= budget:
        return text, False

    def marker(dropped: int) -> str:
        return f"[truncated: {dropped} earlier bytes dropped; a job keeps at most {cap} bytes of logs]\n"

    room = max(0, budget - len(marker(len(data)).encode()))
    tail = data[len(data) - room:] if room else b""
    if tail and data[len(data) - room - 1:len(data) - room] != b"\n":
        cut = tail.find(b"\n")  # cut inside a line: start at the next one
        tail = tail[cut + 1:] if cut >= 0 else tail
    return marker(len(data) - len(tail)) + tail.decode("utf-8", "ignore"), True


def store_replica_log(replica: Replica, text: str, *, now: datetime | None = None) -> ReplicaLog:
    """Keep a placement's log within what is left of its job's cap; a second copy of it is not kept."""
    return store_replica_logs([(replica, text)], now=now)[0]


@transaction.atomic
def store_replica_logs(items: list[tuple[Replica, str]], *, now: datetime | None = None) -> list[ReplicaLog]:
    """`store_replica_log` for many placements in a few queries: each job's logs stay within its cap,
    taken in the order given."""
    job_ids = sorted({replica.job_id for replica, _ in items})
    # one writer per cap
    workspace_of = dict(Job.objects.select_for_update().filter(pk__in=job_ids).order_by("pk").values_list(
        "pk", "workspace_id"))
    known = secrets.known_values(workspace_of.values())  # a kept log never holds a secret's value
    existing: dict[tuple, int] = {}
    used: dict[int, int] = {}
    for pk, job_id, role, index, attempt, size in ReplicaLog.objects.filter(job_id__in=job_ids).values_list(
            "pk", "job_id", "role", "index", "attempt", "size"):
        existing[(job_id, role, index, attempt)] = pk
        used[job_id] = used.get(job_id, 0) + size
    cap, captured_at = settings.JOB_LOG_MAX_BYTES, now or clock.now()
    found = ReplicaLog.objects.in_bulk([existing[k] for k in (_log_key(r) for r, _ in items) if k in existing])
    result, new = [], {}
    for replica, text in items:
        key = _log_key(replica)
        if key in existing:
            result.append(found[existing[key]])
            continue
        if key not in new:
            text = secrets.mask(text, known.get(workspace_of.get(replica.job_id), ()))
            text, truncated = fit(clean(text), cap - used.get(replica.job_id, 0), cap)
            size = len(text.encode())
            used[replica.job_id] = used.get(replica.job_id, 0) + size
            new[key] = ReplicaLog(job_id=replica.job_id, role=replica.role, index=replica.index, attempt=replica.attempt,
                                  node=replica.node.name if replica.node else "", text=text, size=size,
                                  truncated=truncated, captured_at=captured_at)
        result.append(new[key])
    ReplicaLog.objects.bulk_create(list(new.values()))
    return result


def _log_key(replica: Replica) -> tuple[int, str, int, int]:
    return replica.job_id, replica.role, replica.index, replica.attempt


def capture_replica_logs(backend: ClusterBackend, keys: list[ReplicaKey]) -> list[ReplicaLog]:
    """Read from the backend and keep the logs of the keys' last ended placements, unless kept already.
    Called before the backend deletes the pods; a backend that does not answer loses those logs, not the
    deletion. The placements and kept logs are read once for all, and the backend asked once when it
    can answer for many (`logs_many`)."""
    keys = list(dict.fromkeys(keys))
    job_ids = {key[0] for key in keys}
    last: dict[ReplicaKey, Replica] = {}
    for replica in Replica.objects.filter(job_id__in=job_ids).exclude(state__in=ACTIVE_STATES).select_related(
            "node").order_by("attempt", "pk"):
        last[(replica.job_id, replica.role, replica.index)] = replica
    kept = set(ReplicaLog.objects.filter(job_id__in=job_ids).values_list("job_id", "role", "index", "attempt"))
    wanted = [key for key in keys if key in last and _log_key(last[key]) not in kept]
    if not wanted:
        return []
    tail, texts = settings.JOB_LOG_TAIL_LINES, {}
    if hasattr(backend, "logs_many"):
        try:
            texts = {key: "" for key in wanted} | backend.logs_many(wanted, tail_lines=tail)  # no pod: no lines
        except Exception:
            log.warning("the logs of %d replicas could not be read", len(wanted), exc_info=True)
    else:
        for key in wanted:
            try:
                texts[key] = backend.logs(key, tail_lines=tail)
            except Exception:
                log.warning("the log of replica %s/%s-%s could not be read", *key, exc_info=True)
    items = [(last[key], texts[key]) for key in wanted if key in texts]
    return store_replica_logs(items) if items else []


def purge_expired_logs(*, now: datetime | None = None) -> int:
    """Delete the logs captured more than JOB_LOG_RETENTION_DAYS ago; returns how many."""
    cutoff = (now or clock.now()) - timedelta(days=settings.JOB_LOG_RETENTION_DAYS)
    deleted, _ = ReplicaLog.objects.filter(captured_at__lt=cutoff).delete()
    return deleted


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class Section:
    """One placement's log: stored, or read live from the backend."""

    role: str
    index: int
    attempt: int
    node: str
    stored: ReplicaLog | None

    @property
    def key(self) -> tuple[str, int, int]:
        return self.role, self.index, self.attempt

    @property
    def header(self) -> str:
        again = f" (attempt {self.attempt + 1})" if self.attempt else ""
        return f"== {self.role}-{self.index} on {self.node or '?'}{again}\n"


def check_replica(job: Job, name: str | None) -> tuple[str, int] | None:
    """The (role, index) of a replica name the job has (by its roles, or by what ran), or NoSuchReplica."""
    if name is None:
        return None
    role, index = parse_replica_name(name)
    declared = any(r.get("name") == role and index < r.get("max_replicas", 0) for r in job.roles or ())
    if not declared and not (Replica.objects.filter(job=job, role=role, index=index).exists()
                             or ReplicaLog.objects.filter(job=job, role=role, index=index).exists()):
        raise NoSuchReplica(f"job {job.pk} has no replica {name}")
    return role, index


def sections(job: Job, replica: tuple[str, int] | None = None, *, now: datetime | None = None) -> list[Section]:
    """The job's placements that have a log to show, by role, index and attempt."""
    now = now or clock.now()
    stored = ReplicaLog.objects.filter(job=job)
    placed = Replica.objects.filter(job=job).select_related("node")
    if replica is not None:
        stored = stored.filter(role=replica[0], index=replica[1])
        placed = placed.filter(role=replica[0], index=replica[1])
    found = {(s.role, s.index, s.attempt): Section(s.role, s.index, s.attempt, s.node, s) for s in stored}
    placed = list(placed)
    active = {(r.role, r.index) for r in placed if r.is_active}  # the backend's pod is theirs then
    for r in placed:
        recent = r.ended is not None and now - r.ended < CAPTURE_GRACE and (r.role, r.index) not in active
        if (r.role, r.index, r.attempt) not in found and (r.is_active or recent):
            found[(r.role, r.index, r.attempt)] = Section(r.role, r.index, r.attempt,
                                                          r.node.name if r.node else "", None)
    return [found[key] for key in sorted(found)]


def section_text(job: Job, section: Section, backend: ClusterBackend, hide=None) -> str | None:
    """The stored copy, else the backend's log now; None when the backend does not answer. `hide` masks the
    workspace's secret values (read here when not given): a value stored since the log was kept is hidden too."""
    hide = hide or secrets.masker_for(job.workspace_id)
    if section.stored is not None:
        return hide(section.stored.text)
    try:
        text = backend.logs((job.pk, section.role, section.index), tail_lines=settings.JOB_LOG_TAIL_LINES)
    except Exception:
        log.warning("the log of replica %s/%s-%s could not be read", job.pk, section.role, section.index,
                    exc_info=True)
        return None
    return fit(clean(hide(text)), settings.JOB_LOG_MAX_BYTES, settings.JOB_LOG_MAX_BYTES)[0]


def job_log_text(job: Job, backend: ClusterBackend, replica: tuple[str, int] | None = None) -> str:
    """The job's logs, each placement after a `== worker-0 on node` header (none for one replica's only
    placement)."""
    found = sections(job, replica)
    headers = replica is None or len(found) > 1
    parts = []
    hide = secrets.masker_for(job.workspace_id)
    for section in found:
        text = section_text(job, section, backend, hide)
        parts.append((section.header if headers else "")
                     + ("[the cluster did not answer; try again]\n" if text is None else text))
    return "".join(parts)


class LogFollower:
    """What a follow stream sends: the log so far, then at each poll the lines that are new."""

    def __init__(self, job: Job, backend: ClusterBackend, replica: tuple[str, int] | None = None):
        self.job, self.backend, self.replica = job, backend, replica
        self.headers = replica is None
        self.seen: dict[tuple[str, int, int], list[str]] = {}
        self.last: tuple[str, int, int] | None = None  # the section written last
        self.hide = None  # read at the first poll, in the thread that may query (not an event loop)

    def running(self) -> bool:
        self.job.refresh_from_db(fields=["state"])
        return self.job.state in ACTIVE_STATES

    def poll(self, *, final: bool = False) -> str:
        self.hide = self.hide or secrets.masker_for(self.job.workspace_id)
        found = sections(self.job, self.replica)
        self.headers = self.headers or len(found) > 1
        out: list[str] = []
        for section in found:
            text = section_text(self.job, section, self.backend, self.hide)
            lines = (text or "").splitlines(keepends=True)
            if not final and section.stored is None and lines and not lines[-1].endswith("\n"):
                lines.pop()  # still being written: sent once complete
            if not lines:
                continue  # nothing yet, or no answer this time: what was seen still stands
            new = new_lines(self.seen.get(section.key, []), lines)
            self.seen[section.key] = lines
            if new:
                if self.headers and self.last != section.key:
                    out.append(section.header)
                self.last = section.key
                out.extend(new)
        text = "".join(out)
        return text if not text or text.endswith("\n") else text + "\n"


def new_lines(seen: list[str], now: list[str]) -> list[str]:
    """The lines of `now` after those already `seen`. Both are windows on one log (a tail, or a stored copy
    that may start with a marker): `seen`'s last lines are found in `now` where the most of them match."""
    if not seen:
        return now
    best, end = 0, -1
    for at, line in enumerate(now):
        if line != seen[-1]:
            continue
        n = 1
        while n < len(seen) and n <= at and now[at - n] == seen[-1 - n]:
            n += 1
        if n > best:
            best, end = n, at
    return now[end + 1:]


def pause(seconds: float) -> None:
    """The wait between polls of a synchronous follow stream."""
    time.sleep(seconds)


WAIT = None  # a follow step that asks for a poll interval's wait


def _follow_steps(follower: LogFollower) -> Iterator[str | None]:
    until = time.monotonic() + settings.JOB_LOG_FOLLOW_SECONDS
    yield follower.poll()
    while follower.running() and time.monotonic() < until:
        yield WAIT
        yield follower.poll()
    yield follower.poll(final=True)  # the lines kept when the replicas ended, and any unfinished one


def follow(job: Job, backend: ClusterBackend, replica: tuple[str, int] | None = None) -> Iterator[str]:
    """The log so far, then new lines every JOB_LOG_POLL_SECONDS until the job stops running or
    JOB_LOG_FOLLOW_SECONDS have passed."""
    for step in _follow_steps(LogFollower(job, backend, replica)):
        if step is WAIT:
            pause(settings.JOB_LOG_POLL_SECONDS)
        elif step:
            yield step


async def follow_async(job: Job, backend: ClusterBackend, replica: tuple[str, int] | None = None
                       ) -> AsyncIterator[str]:
    """`follow` for an ASGI server, which would read a synchronous stream whole before sending it: the
    database work runs in Django's sync thread, the waits on the event loop."""
    steps = _follow_steps(LogFollower(job, backend, replica))
    done = object()
    step_once = sync_to_async(next, thread_sensitive=True)
    while (step := await step_once(steps, done)) is not done:
        if step is WAIT:
            await asyncio.sleep(settings.JOB_LOG_POLL_SECONDS)
        elif step:
            yield step
