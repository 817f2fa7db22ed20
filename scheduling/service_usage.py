"""Tokens an inference service answered: what the portal's endpoint meters from each answer's `usage`, kept
per service, minute, key, replica and revision (`ServiceTokenUsage`), and the sums the service pages read.

One answer is one upsert of its minute's row (an UPDATE with F() sums, an INSERT for the minute's first
answer), so a busy service writes one row per minute and key and replica, not one per request; two first
answers of a minute that race may each insert a row, which no sum notices.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F, Sum

from scheduling import clock
from scheduling.models import Job, ServiceTokenUsage

MAX_TOKENS_PER_ANSWER = 10_000_000  # more is a server's error, not an answer: never counted


def _count(usage: dict, name: str) -> int:
    value = usage.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS_PER_ANSWER:
        return 0
    return value


def _seconds(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return 0.0
    return seconds if 0.0 <= seconds < 86_400 else 0.0


def record_usage(
    service: Job | int,
    key_id: int | None,
    usage: dict | None,
    replica: str,
    *,
    revision: int | None = None,
    prefill_s: float | None = None,
    decode_s: float | None = None,
    ttft_s: float | None = None,
    now: datetime | None = None,
) -> bool:
    """Add one answer's `usage` ({"prompt_tokens", "completion_tokens"}, as OpenAI servers give it) to the
    service's row of this minute for the key (None: a member's token), replica and revision; with the prefill
    and decode seconds and the time to first token when the replica reported them. An answer without usable
    counts is not metered. Returns whether it was."""
    if not isinstance(usage, dict):
        return False
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    if not prompt and not completion:
        return False
    minute = (now or clock.now()).replace(second=0, microsecond=0)
    job_id = service if isinstance(service, int) else service.pk
    ttft = None if ttft_s is None else _seconds(ttft_s)
    adds = {
        "requests": 1,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "prefill_seconds": _seconds(prefill_s),
        "decode_seconds": _seconds(decode_s),
        "ttft_seconds": ttft or 0.0,
        "ttft_count": 0 if ttft is None else 1,
    }
    row = {"job_id": job_id, "minute": minute, "replica": replica[:80], "revision": revision}
    found = ServiceTokenUsage.objects.filter(
        **row, **({"key_id__isnull": True} if key_id is None else {"key_id": key_id})
    )
    if not found.update(**{name: F(name) + value for name, value in adds.items()}):
        ServiceTokenUsage.objects.create(**row, key_id=key_id, **adds)
    return True


@dataclass(frozen=True)
class TokenTotals:
    """Sums of a service's (or one revision's) metered answers."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    ttft_seconds: float = 0.0
    ttft_count: int = 0

    @property
    def tokens_per_second(self) -> float | None:
        """Completion tokens per second of decoding: how fast an answer's text comes out."""
        return self.completion_tokens / self.decode_seconds if self.decode_seconds > 0 else None

    @property
    def ttft_mean_s(self) -> float | None:
        return self.ttft_seconds / self.ttft_count if self.ttft_count else None


SUMMED = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "prefill_seconds",
    "decode_seconds",
    "ttft_seconds",
    "ttft_count",
)


def _totals(row: dict) -> TokenTotals:
    return TokenTotals(**{name: row.get(name) or 0 for name in SUMMED})


def totals_by_service(
    job_ids, *, since: datetime | None = None, until: datetime | None = None
) -> dict[int, TokenTotals]:
    """Per service, the sums of its metered answers (in [since, until) when given)."""
    rows = ServiceTokenUsage.objects.filter(job_id__in=job_ids)
    if since is not None:
        rows = rows.filter(minute__gte=since)
    if until is not None:
        rows = rows.filter(minute__lt=until)
    return {
        row["job_id"]: _totals(row)
        for row in rows.order_by().values("job_id").annotate(**{name: Sum(name) for name in SUMMED})
    }


def totals_by_revision(job: Job) -> dict[int | None, TokenTotals]:
    """A service's sums per revision (None: answers metered before the service had revisions)."""
    return {
        row["revision"]: _totals(row)
        for row in ServiceTokenUsage.objects.filter(job=job)
        .order_by()
        .values("revision")
        .annotate(**{name: Sum(name) for name in SUMMED})
    }


def tokens_by_hour(pairs) -> dict[tuple[int, datetime], tuple[int, int]]:
    """(prompt, completion) tokens per (service id, hour) for the given pairs: what a ledger line's hour of the
    service answered."""
    pairs = set(pairs)
    if not pairs:
        return {}
    job_ids = {job_id for job_id, _ in pairs}
    hours = sorted(hour for _, hour in pairs)
    out: dict[tuple[int, datetime], list[int]] = {}
    for job_id, minute, prompt, completion in ServiceTokenUsage.objects.filter(
        job_id__in=job_ids, minute__gte=hours[0], minute__lt=hours[-1] + timedelta(hours=1)
    ).values_list("job_id", "minute", "prompt_tokens", "completion_tokens"):
        key = (job_id, minute.replace(minute=0, second=0, microsecond=0))
        if key in pairs:
            found = out.setdefault(key, [0, 0])
            found[0] += prompt
            found[1] += completion
    return {key: (p, c) for key, (p, c) in out.items()}
