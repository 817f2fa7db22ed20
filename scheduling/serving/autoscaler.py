"""How many replicas an inference service wants (pure; no Django, no clock: callers pass the time).

Every evaluation (the controller's tick, a few seconds apart) gives the observed load of the whole
service over the last window: its mean concurrency (requests in flight, in service or waiting,
averaged over time) or its request rate. Then

    recommended = ceil(observed / target), clamped to [min, max]; at least 1 when there is any traffic
    desired     = the highest recommendation of the last `scale_down_delay_s` seconds (this one included)

so a service scales up at once (a higher recommendation wins at once) and down only when every
recommendation of a whole delay was lower: to zero after a delay with no traffic, when min is 0.
A request that arrives while the service has no replica calls `wake`: one replica (min, when
higher) starts at once, without waiting for the next tick, and the request waits for it (a cold
start). This is the rule of the Kubernetes HPA's scale-down stabilisation window, with Knative's
scale from zero.

`TrafficWindow` measures the two metrics from request events; `observe` computes them from two
scrapes of cumulative counters (requests, in-flight seconds), as the simulated inference server's
`/metrics` exposes them.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

METRICS = ("concurrency", "rps", "queueDepth", "ttftP95")
# Metrics that measure how the replicas there are cope (not the load itself): the replicas scale in proportion,
# as the Kubernetes HPA does, recommended = ceil(current * observed / target).
RATIO_METRICS = ("queueDepth", "ttftP95")


@dataclass(frozen=True)
class ScalePolicy:
    min_replicas: int
    max_replicas: int
    metric: str = "concurrency"     # concurrency: in-flight requests per replica; rps: requests/s per replica;
    # queueDepth: requests waiting per replica; ttftP95: seconds to the first token at p95
    target: float = 4.0
    scale_down_delay_s: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError("need 0 <= min_replicas <= max_replicas and max_replicas >= 1")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}")
        if not self.target > 0 or self.scale_down_delay_s < 0:
            raise ValueError("target must be above 0 and scale_down_delay_s at least 0")

    @classmethod
    def of_service(cls, scale_min: int, scale_max: int, inference) -> ScalePolicy:
        """The policy of a service from its role's declared range and its `spec.workloads.InferenceSpec`."""
        return cls(scale_min, scale_max, inference.target_metric, float(inference.target_value),
                   float(inference.scale_down_delay_s))


@dataclass(frozen=True)
class ScaleDecision:
    desired: int
    recommended: int        # from this observation alone, before the scale-down delay
    observed: float
    # why, as a key and its figures: the caller words it (scheduling/history_catalogue.py SCALE_*)
    reason_key: str = "woken"
    figures: tuple[tuple[str, str], ...] = ()


class Autoscaler:
    """The desired replica count of one service, evaluation after evaluation."""

    def __init__(self, policy: ScalePolicy):
        self.policy = policy
        self._recent: deque[tuple[float, int]] = deque()   # (time, recommendation), within the delay

    def recommend(self, observed: float, current: int = 0, busy: bool = False) -> int:
        """From one observation: for a load metric ceil(observed / target); for a ratio metric (queueDepth:
        requests waiting per replica, ttftP95) ceil(current * observed / target), at least one while the
        service is `busy` (it answered requests in the window)."""
        p = self.policy
        if p.metric in RATIO_METRICS:
            wanted = math.ceil(max(1, current) * observed / p.target - 1e-9) if observed > 0 else 0
            if busy:
                wanted = max(wanted, 1)
            if observed > p.target:   # over target: at least one more than there are
                wanted = max(wanted, current + 1)
        elif observed <= 0:
            wanted = 0
        else:
            wanted = max(1, math.ceil(observed / p.target - 1e-9))
        return max(p.min_replicas, min(p.max_replicas, wanted))

    def decide(self, now: float, observed: float, current: int, waiting: int = 0, busy: bool = False
               ) -> ScaleDecision:
        """The replicas the service should have now, given what it has (`current`: started or starting).
        `waiting`: requests held for the service right now; while there are any it keeps one replica.
        `busy`: it answered requests since the last evaluation (the ratio metrics keep one replica then)."""
        recommended = self.recommend(observed, current, busy)
        if waiting > 0:
            recommended = max(recommended, 1)
        desired = self._remember(now, recommended)
        key, figures = self._reason(desired, recommended, observed, current)
        return ScaleDecision(desired, recommended, observed, key, tuple(figures.items()))

    def wake(self, now: float) -> ScaleDecision:
        """A request arrived while the service had no replica: start one (or min) now."""
        recommended = max(1, self.policy.min_replicas)
        desired = self._remember(now, recommended)
        return ScaleDecision(desired, recommended, 0.0, "woken")

    def restore(self, recent: list[tuple[float, int]]) -> None:
        """Take back the recommendations kept from earlier evaluations (`recent()`), for a caller that
        keeps the autoscaler's memory between processes."""
        self._recent = deque((float(t), int(n)) for t, n in recent)

    def recent(self) -> list[tuple[float, int]]:
        """The recommendations still within the scale-down delay, oldest first."""
        return list(self._recent)

    def _remember(self, now: float, recommended: int) -> int:
        recent = self._recent
        recent.append((now, recommended))
        while recent and recent[0][0] < now - self.policy.scale_down_delay_s:
            recent.popleft()
        return max(r for _, r in recent)

    def _reason(self, desired: int, recommended: int, observed: float, current: int) -> tuple[str, dict[str, str]]:
        p = self.policy
        figures = {"metric": p.metric, "observed": f"{observed:.3g}", "target": f"{p.target:g}",
                   "current": str(current), "desired": str(desired), "recommended": str(recommended),
                   "delay": f"{p.scale_down_delay_s:g}"}
        if desired > current:
            return "up", figures
        if desired < current:
            return "down", figures
        if recommended < desired:
            return "stays_delayed", figures
        return "stays", figures


class TrafficWindow:
    """Mean concurrency (time-weighted requests in flight) and request rate since the last `read`."""

    def __init__(self, start: float = 0.0):
        self.start = self._last = start
        self.in_flight = 0
        self._area = 0.0
        self._arrivals = 0

    def _advance(self, now: float) -> None:
        self._area += self.in_flight * (now - self._last)
        self._last = now

    def arrive(self, now: float) -> None:
        self._advance(now)
        self.in_flight += 1
        self._arrivals += 1

    def finish(self, now: float) -> None:
        self._advance(now)
        self.in_flight -= 1

    def read(self, now: float) -> tuple[float, float]:
        """(mean concurrency, requests per second) since the last read; starts a new window."""
        self._advance(now)
        span = now - self.start
        figures = (self._area / span, self._arrivals / span) if span > 0 else (float(self.in_flight), 0.0)
        self.start, self._area, self._arrivals = now, 0.0, 0
        return figures


@dataclass(frozen=True)
class Scrape:
    """Cumulative counters of a service at one moment (summed over its replicas)."""

    time: float
    requests_total: int
    in_flight_seconds_total: float


def observe(previous: Scrape, current: Scrape, metric: str) -> float:
    """The metric between two scrapes: mean concurrency = d(in-flight seconds) / dt, rps = d(requests) / dt.
    A counter that went back (a replica restarted) counts from zero."""
    span = current.time - previous.time
    if span <= 0:
        raise ValueError("scrapes must be in time order")
    if metric == "rps":
        done = current.requests_total - previous.requests_total
        return (done if done >= 0 else current.requests_total) / span
    busy = current.in_flight_seconds_total - previous.in_flight_seconds_total
    return (busy if busy >= 0 else current.in_flight_seconds_total) / span
