"""Retrying Kubernetes API calls: capped exponential backoff, Retry-After honoured.

Retried: 429 (throttled), 5xx, connection errors and timeouts. Everything else (400, 403, 404, 409,
422) is an answer, handed back to the caller, who decides what it means (404 on delete = done,
409 on create = already there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class KubernetesApiError(RuntimeError):
    """A call that failed for good: after every retry, or with an answer nobody handled."""

    def __init__(self, what: str, status: int, detail: str) -> None:
        super().__init__(f"Kubernetes API: {what} failed (HTTP {status or 'no answer'}): {detail}")
        self.what, self.status, self.detail = what, status, detail


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # calls in all, the first included
    base_s: float = 0.2
    cap_s: float = 5.0  # no single wait is longer, Retry-After included

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_s < 0 or self.cap_s < self.base_s:
            raise ValueError(f"retry policy needs attempts >= 1 and 0 <= base_s <= cap_s, got {self}")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Wait before retry number `retry` (0-based): base * 2^retry, or the server's Retry-After
        when it asks for longer, never more than the cap."""
        wait = self.base_s * (2**retry)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.cap_s)


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed call, 0 when no answer came (connection error, timeout)."""
    return int(getattr(exc, "status", 0) or 0) if isinstance(exc, ApiException) else 0


def retry_after_of(exc: BaseException) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in RETRYABLE_STATUS or not exc.status
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError)


def detail_of(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.reason or ''} {(exc.body or '')[:300] if isinstance(exc.body, str) else ''}".strip()
    return f"{type(exc).__name__}: {exc}"


def call_with_retry(fn: Callable[[], T], what: str, policy: RetryPolicy,
                    sleep: Callable[[float], None] = time.sleep) -> T:
    """fn() until it answers; non-retryable ApiExceptions go to the caller unchanged."""
    for attempt in range(policy.attempts):
        try:
            return fn()
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            if not is_retryable(exc):
                raise
            if attempt + 1 == policy.attempts:
                raise KubernetesApiError(what, status_of(exc), detail_of(exc)) from exc
            sleep(policy.delay(attempt, retry_after_of(exc)))
    raise AssertionError("unreachable")  # the loop returns or raises
