"""How a job's run ends: its end code, the sentence that says why, and what the job row keeps of it.

Every end has a code (the API's `end_code`): succeeded, exit_code, oom, node_lost, cancelled and
max_runtime_exceeded end a job; preempted ends an attempt only (the job goes back in its queue). A failure's
class is its code; `retry.on` names the classes a job retries (scheduling.lifecycle.retries).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduling import history_catalogue as texts
from scheduling import history_texts
from scheduling.history_texts import said
from scheduling.spec.units import format_duration, format_memory, parse_duration

SUCCEEDED = "succeeded"
EXIT_CODE = "exit_code"
OOM = "oom"
NODE_LOST = "node_lost"
PREEMPTED = "preempted"
CANCELLED = "cancelled"
MAX_RUNTIME_EXCEEDED = "max_runtime_exceeded"
END_CODES = (SUCCEEDED, EXIT_CODE, OOM, NODE_LOST, CANCELLED, MAX_RUNTIME_EXCEEDED)
ATTEMPT_CLASSES = (*END_CODES, PREEMPTED)

# The classes each `retry.on` word retries.
RETRY_ON_CLASSES = {
    "failed": (EXIT_CODE, OOM),
    "oom": (OOM,),
    "nodeLost": (NODE_LOST,),
    "maxRuntime": (MAX_RUNTIME_EXCEEDED,),
}
OOM_EXIT_CODE = 137


@dataclass(frozen=True)
class Failure:
    """How a run failed: its class (an end code), the replica and its exit code, and what to say."""

    code: str
    reason: Any  # a history_texts value or plain text
    exit_code: int | None = None
    memory_mib: int | None = None


def replica_failure(
    replica: str, exit_code: int | None, oom: bool, mem_mib: int | None, message: str
) -> Failure:
    """A replica that failed: OOM when the backend says so or it exited 137 (killed) with a memory limit, else
    its exit code; without one, what the backend said."""
    if oom or (exit_code == OOM_EXIT_CODE and mem_mib):
        return Failure(
            OOM,
            said(texts.OUT_OF_MEMORY, replica=replica, memory=format_memory(mem_mib or 0)),
            exit_code=OOM_EXIT_CODE,
            memory_mib=mem_mib,
        )
    if exit_code is not None:
        sentence = (
            said(texts.EXITED_WITH_CODE_SAYING, replica=replica, exit_code=exit_code, message=message)
            if message
            else said(texts.EXITED_WITH_CODE, replica=replica, exit_code=exit_code)
        )
        return Failure(EXIT_CODE, sentence, exit_code=exit_code)
    return Failure(EXIT_CODE, said(texts.REPLICA_FAILED, replica=replica, message=message))


def max_runtime_failure(limit_s: int) -> Failure:
    return Failure(MAX_RUNTIME_EXCEEDED, said(texts.MAX_RUNTIME_REACHED, limit=format_duration(limit_s)))


def mark_end(job, code: str, reason: Any, now: datetime) -> list[str]:
    """Write the end on the job (not saved): its code, its sentence, no deadline, and when its replicas are
    cleaned up (ttlAfterFinished). Returns the fields written."""
    job.end_code = code
    job.end_params = {
        "said": history_texts.stored(reason),
        "text": history_texts.english(reason) if not isinstance(reason, str) else reason,
    }
    job.deadline = None
    ttl = (job.spec or {}).get("ttlAfterFinished")
    if ttl:
        job.cleanup_at = now + timedelta(seconds=parse_duration(ttl))
    return ["end_code", "end_params", "deadline", "cleanup_at"]


def end_reason_text(job) -> str:
    """The job's end in the active language ("" while it has not ended)."""
    params = job.end_params or {}
    return history_texts.text(params.get("said"), params.get("text", ""))
