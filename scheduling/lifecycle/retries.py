"""Retries with back-off: whether a failed run counts against the job's `retry.limit`, and whether it runs again.

A failure counts when its class is one `retry.on` lists (`onExitCodes` narrows exit codes and OOM to those
codes); the job runs again while fewer than `limit` failures counted before it, after `backoff` doubled per
counted failure, at most `maxBackoff`. Evictions never count (they requeue as before); a lost node counts only
when `on` lists nodeLost.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.lifecycle.attempts import counted_failures
from scheduling.lifecycle.ends import RETRY_ON_CLASSES, Failure
from scheduling.spec.model import DEFAULT_RETRY_BACKOFF_S, DEFAULT_RETRY_MAX_BACKOFF_S
from scheduling.spec.units import parse_duration


@dataclass(frozen=True)
class Verdict:
    counted: bool  # this failure counts against the limit
    retry: bool  # and the job runs again
    number: int  # the attempt that just failed (1-based, counted failures only)
    limit: int
    backoff_s: int = 0


def retry_policy(job) -> dict | None:
    """The spec's `retry` as its clean form stores it (None: no retries)."""
    return (job.spec or {}).get("retry")


def counts(policy: dict | None, failure: Failure) -> bool:
    if not policy:
        return False
    classes = {c for word in policy.get("on") or ["failed"] for c in RETRY_ON_CLASSES.get(word, ())}
    if failure.code not in classes:
        return False
    codes = policy.get("onExitCodes")
    if codes and failure.code in RETRY_ON_CLASSES["failed"]:
        return failure.exit_code in codes
    return True


def backoff_after(policy: dict, counted_before: int) -> int:
    base = parse_duration(policy.get("backoff") or f"{DEFAULT_RETRY_BACKOFF_S}s")
    most = parse_duration(policy.get("maxBackoff") or f"{DEFAULT_RETRY_MAX_BACKOFF_S}s")
    return min(most, base * 2 ** min(counted_before, 30))


def judge(failures: list[tuple[object, Failure]]) -> dict[int, Verdict]:
    """Per failed job, whether its failure counts and whether it is retried (one query for all)."""
    before = counted_failures(job.pk for job, failure in failures if counts(retry_policy(job), failure))
    verdicts = {}
    for job, failure in failures:
        policy = retry_policy(job)
        limit = int((policy or {}).get("limit") or 0)
        if not counts(policy, failure):
            verdicts[job.pk] = Verdict(False, False, before.get(job.pk, 0) + 1, limit)
            continue
        used = before.get(job.pk, 0)
        retry = used < limit
        verdicts[job.pk] = Verdict(True, retry, used + 1, limit, backoff_after(policy, used) if retry else 0)
    return verdicts
