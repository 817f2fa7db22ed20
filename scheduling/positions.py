"""What a pending job's queue position means for it: the position is the order in which the scheduler will
try the queue's jobs (`forecast.queue_positions`), not the order they start. A whole-GPU gang that waits for
GPUs may see smaller jobs behind it start first (backfill); once it has waited past `BACKFILL_PATIENCE` the
scheduler holds nodes for it (`core.actions.reserve`) and its reason leads with `backfill_reserved`. The
note says which, for the pages and the API, from the job's stored reason alone (no query)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduling.models import Job, JobState
from scheduling.reasons import position_note_text

# reasons that say the job waits for free GPUs (not for its quota, off-peak or a dependency)
CAPACITY_CODES = frozenset({"gpus_short", "gang_gpus_short", "gpus_not_on_one_node", "gang_does_not_fit",
                            "role_short", "topology_no_domain"})


@dataclass(frozen=True)
class PositionNote:
    code: str                    # backfill_may_pass | gpus_reserved
    params: dict[str, Any]

    @property
    def text(self) -> str:
        """In the active language."""
        return position_note_text(self.code, self.params)


def gang_gpus(roles: list[dict] | None) -> int:
    """Whole GPUs the job needs at once (every role at its minimum); 0 when a role shares GPUs."""
    total = 0
    for role in roles or ():
        if role.get("mode", "exclusive") != "exclusive":
            return 0
        total += int(role.get("num_gpus") or 0) * int(role.get("min_replicas") or 0)
    return total


def reason_codes(code: str, params: Any) -> list[str]:
    """A stored reason's codes, the parts of a `several` in order."""
    if code == "several" and isinstance(params, dict):
        out: list[str] = []
        for part in params.get("parts") or ():
            if isinstance(part, dict):
                out.extend(reason_codes(part.get("code", ""), part.get("params")))
        return out
    return [code] if code else []


def position_note(job: Job) -> PositionNote | None:
    """For a pending whole-GPU gang: "GPUs reserved" when nodes are held for it, else, when it waits for GPUs,
    that smaller jobs may start first meanwhile. None otherwise."""
    if job.state != JobState.PENDING:
        return None
    gpus = gang_gpus(job.roles)
    if gpus < 2:
        return None
    codes = reason_codes(job.pending_code, job.pending_params)
    if "backfill_reserved" in codes:
        return PositionNote("gpus_reserved", {"gpus": gpus})
    if codes and codes[0] in CAPACITY_CODES:
        return PositionNote("backfill_may_pass", {"gpus": gpus})
    return None
