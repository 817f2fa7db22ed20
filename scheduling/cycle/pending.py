"""Pending jobs' reasons, written by the cycle: why each waiting job waits, in Job.pending_*.

A new reason (its lead code changes: "no room" became "over the queue's limit"; the shortages of
room in a pool count as one) is written at once, with an event and a live update. A reason whose figures alone move ("only 2 free" became
"only 3 free") is rewritten too, but at most `FIGURES_PER_CYCLE` such rows a cycle, those written
longest ago first: on a cluster with tens of thousands of waiting jobs every bind moves the
figures of all of them, and rewriting every row every cycle cost more than the decision itself.
Below that many waiting jobs every reason is current after every cycle.

`PendingReasons` is what a long-lived worker keeps between cycles: the reason each pending row
holds, as the last cycle wrote or read it, so that only new pending rows are read. A row whose
code differs from the kept one was written by someone else (requeued, released from a budget
hold: codes the cycle never writes) and is read again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from django.db import connection, transaction
from django.db.models import TextField
from django.db.models.functions import Cast

from scheduling import core
from scheduling.core.reasons import lead_code
from scheduling.history_texts import Code, Worded
from scheduling.models import Job, JobState
from scheduling.services import record_events

FIGURES_PER_CYCLE = 2000   # rows whose figures alone changed, rewritten per cycle
READ_CHUNK = 5000          # primary keys per query when reading rows not kept

PENDING_FIELDS = ["pending_reason", "pending_code", "pending_params"]


# Shortages of room in a pool: which of them leads moves with the free figures (8 GPUs free but at
# most 7 on a node, then 7 free) and flipped between them every cycle for a thousand jobs; for the
# job's events they are one piece of news, "no room yet", and their changes are figures.
ROOM_SHORT = frozenset({"cpu_memory_short", "gpus_short", "gang_gpus_short", "gpus_not_on_one_node",
                        "gpu_shares_short", "mig_none_free", "gang_mig_short", "timeslice_slots_short",
                        "timeslice_not_on_one_node", "host_short", "gang_does_not_fit"})


def news_kind(code: str, params: dict) -> str:
    """What a reason says for the job's events: its lead code, the room shortages as one."""
    lead = lead_code(code, params)
    return "room_short" if lead in ROOM_SHORT else lead


class PendingReason(NamedTuple):
    """A job's new reason, named as the Job's fields (`write_pending_reasons` takes either)."""

    pk: int
    pending_reason: str
    pending_code: str
    pending_params: dict


@dataclass(frozen=True)
class Held:
    """What a pending row holds, and the cycle that wrote it (0: read, not written by us)."""

    text: str
    code: str
    params: dict
    written: int = 0

    @cached_property
    def news(self) -> str:
        """`news_kind` of what it holds, worked out once: a kept row is compared every cycle."""
        return news_kind(self.code, self.params)


class PendingReasons:
    """The reasons the pending rows hold as the last committed cycle left them."""

    def __init__(self) -> None:
        self.held: dict[int, Held] = {}
        self.cycle = 0


def write_pending_reasons(jobs: list[Job] | list[PendingReason]) -> None:
    """Only to jobs still pending: one cancelled or started since it was read keeps no reason."""
    if connection.vendor != "postgresql":
        groups: dict[str, list] = defaultdict(list)
        for job in jobs:  # few distinct reasons: one UPDATE each
            groups[json.dumps([job.pending_reason, job.pending_code, job.pending_params], sort_keys=True)].append(job)
        for same in groups.values():
            first = same[0]
            Job.objects.filter(pk__in=[job.pk for job in same], state=JobState.PENDING).update(
                pending_reason=first.pending_reason, pending_code=first.pending_code,
                pending_params=first.pending_params)
        return
    # Thousands of reasons may change in a cycle: one statement, not a CASE per row, and each
    # distinct reason sent once with its jobs (the cycle shares one reason among many jobs).
    groups: dict[tuple, list] = {}
    for job in jobs:
        key = (job.pending_reason, job.pending_code, id(job.pending_params))
        found = groups.get(key)
        if found is None:
            groups[key] = [job.pending_params, job.pk]
        else:
            found.append(job.pk)
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS j SET pending_reason = v.reason, pending_code = v.code, pending_params = v.params "
            "FROM (SELECT r.reason, r.code, r.params, unnest(r.ids) AS id FROM json_to_recordset(%s::json) "
            "AS r(ids bigint[], reason text, code text, params jsonb)) AS v WHERE j.id = v.id AND j.state = %s",
            [json.dumps([{"ids": found[1:], "reason": text, "code": code, "params": found[0]}
                         for (text, code, _), found in groups.items()]), JobState.PENDING])


def _held_now(reasons: dict[str, core.Reason], kept: PendingReasons) -> dict[int, Held]:
    """What every pending row the cycle has a reason for holds now: kept rows whose code is
    unchanged, the others read."""
    held, unknown = {}, []
    for pk, code in Job.objects.filter(state=JobState.PENDING).order_by("pk").values_list("pk", "pending_code"):
        if str(pk) not in reasons:
            continue
        known = kept.held.get(pk)
        if known is not None and known.code == code:
            held[pk] = known
        else:
            unknown.append(pk)
    for start in range(0, len(unknown), READ_CHUNK):
        for pk, text, code, params in Job.objects.filter(pk__in=unknown[start:start + READ_CHUNK]).values_list(
                "pk", "pending_reason", "pending_code", Cast("pending_params", TextField())):
            held[pk] = Held(text, code, json.loads(params) if params else {})
    return held


def set_pending_reasons(reasons: dict[str, core.Reason], texts: dict[str, str],
                        kept: PendingReasons | None = None) -> None:
    """Keep every pending job's reason current (figures within `FIGURES_PER_CYCLE`); an event
    (and a live update) only when the reason itself changes, not its figures, so a waiting
    cluster does not flood the pages every cycle."""
    kept = kept if kept is not None else PendingReasons()
    cycle = kept.cycle + 1
    held = _held_now(reasons, kept)
    news, figures = [], []
    news_of: dict[int, str] = {}   # id(reason) -> its news_kind: thousands of jobs share a few reasons
    for pk, old in held.items():
        key = str(pk)
        reason = reasons[key]
        if texts[key] == old.text and reason.code == old.code and reason.params == old.params:
            continue
        # a row from before reasons had codes takes its first code quietly
        if old.code or not old.text:
            kind = news_of.get(id(reason))
            if kind is None:
                kind = news_of[id(reason)] = news_kind(reason.code, reason.params)
            if kind != old.news:
                news.append(pk)
                continue
        figures.append(pk)
    figures.sort(key=lambda pk: (held[pk].written, pk))
    written = news + figures[:FIGURES_PER_CYCLE]
    for pk in written:
        reason = reasons[str(pk)]
        held[pk] = Held(texts[str(pk)], reason.code, reason.params, cycle)
    if written:
        write_pending_reasons([PendingReason(pk, held[pk].text, held[pk].code, held[pk].params) for pk in written])

    def keep() -> None:
        kept.held, kept.cycle = held, cycle

    transaction.on_commit(keep)   # a cycle rolled back leaves the rows, and so the kept reasons, as they were
    # the events' jobs, without their specs: news comes by the thousand when a busy cluster shifts
    jobs = Job.objects.select_related("workspace").defer("spec_text", "spec", "roles").in_bulk(news) if news else {}
    record_events([(jobs[pk], "pending", Worded(texts[str(pk)], Code(reasons[str(pk)].code, reasons[str(pk)].params)),
                    None) for pk in news if pk in jobs])
