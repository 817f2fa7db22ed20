"""One inference service in simulated time: Poisson traffic, the autoscaler, replicas on GPU slices.

A discrete-event simulation (no clock, no sleeps) that uses the production rules: the latency model
(`latency.ServerModel`) for every request's service time and the autoscaler (`autoscaler.Autoscaler`)
every `tick_s`. It is what `bench/inference.py` runs, and what a quote for a service at a stated
request rate can run.

The service: requests arrive by a Poisson process whose rate steps (`Step`); each asks for a number of
tokens drawn uniformly from `tokens`. They wait in one queue (the portal's, in front of the replicas)
and go, first come first served, to the ready replica with the fewest requests in service that has
a free slot. A replica holds its GPU slice from the moment it starts; it is ready `cold_start_s` later
(pulling the image, loading the model). When the autoscaler wants fewer replicas, starting ones go
first, then the least busy; a replica that still serves requests drains them before it frees its
slice. A request that arrives while the service has no replica wakes it at once (a cold start).

A request is counted as "during a cold start" when it arrived while a replica was starting, or while
requests that arrived then were still waiting (the backlog a start leaves); `p95_warm_s` leaves them
out, `p95_s` counts everything. With `fixed=True` the service runs `max_replicas` ready replicas from
the start and never scales: the always-on deployment it is compared with.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from scheduling.serving.autoscaler import Autoscaler, ScalePolicy, TrafficWindow
from scheduling.serving.latency import ServerModel


@dataclass(frozen=True)
class Step:
    rate: float          # requests per second
    duration_s: float


@dataclass
class StepResult:
    rate: float
    start_s: float
    end_s: float
    requests: int = 0
    cold_requests: int = 0
    p50_s: float | None = None
    p95_s: float | None = None
    p95_warm_s: float | None = None
    cold_starts: int = 0            # the service woke from zero
    replica_starts: int = 0
    gpu_seconds: float = 0.0
    replicas: list[int] = field(default_factory=list)   # replicas held, sampled every sample_s
    replicas_min: int = 0
    replicas_max: int = 0
    replicas_mean: float = 0.0


@dataclass
class SimulationResult:
    steps: list[StepResult]
    share: float
    saturated_latency_s: float      # L_sat of one replica on this slice
    duration_s: float
    requests: int
    gpu_seconds: float
    p95_s: float | None
    p95_warm_s: float | None
    cold_starts: int
    replica_starts: int
    sample_s: float
    unfinished: int                 # requests still in flight when the simulation stopped


@dataclass(eq=False)
class _Replica:
    ident: int
    started: float
    ready: bool = False
    draining: bool = False
    in_service: int = 0


@dataclass(eq=False)
class _Request:
    arrived: float
    tokens: int
    cold: bool


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of the values, None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class _Service:
    def __init__(self, policy: ScalePolicy, share: float, model: ServerModel, cold_start_s: float, fixed: bool):
        self.policy, self.share, self.model, self.cold_start_s, self.fixed = policy, share, model, cold_start_s, fixed
        self.autoscaler = Autoscaler(policy)
        self.window = TrafficWindow(0.0)
        self.replicas: list[_Replica] = []
        self.waiting: deque[_Request] = deque()
        self.events: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self._ids = 0
        self.backlog_cold = False
        self.held_changes: list[tuple[float, int]] = [(0.0, 0)]
        self.done: list[tuple[float, float, bool]] = []   # (arrived, latency, cold)
        self.starts: list[float] = []
        self.wakes: list[float] = []

    # -- events ---------------------------------------------------------------------------------
    def schedule(self, at: float, kind: str, payload: object = None) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, self._seq, kind, payload))

    # -- replicas -------------------------------------------------------------------------------
    def active(self) -> list[_Replica]:
        return [r for r in self.replicas if not r.draining]

    def starting(self) -> bool:
        return any(not r.ready for r in self.replicas)

    def _record_held(self, now: float) -> None:
        self.held_changes.append((now, len(self.replicas)))

    def start_replica(self, now: float, *, ready: bool = False) -> None:
        self._ids += 1
        replica = _Replica(self._ids, now, ready=ready)
        self.replicas.append(replica)
        self._record_held(now)
        if not ready:
            self.starts.append(now)
            self.backlog_cold = True
            self.schedule(now + self.cold_start_s, "ready", replica)

    def stop_replica(self, now: float, replica: _Replica) -> None:
        self.replicas.remove(replica)
        self._record_held(now)

    def scale_to(self, now: float, desired: int) -> None:
        active = self.active()
        if desired > len(active):
            missing = desired - len(active)
            for replica in [r for r in self.replicas if r.draining][:missing]:
                replica.draining = False     # still warm: take it back before starting another
                missing -= 1
            for _ in range(missing):
                self.start_replica(now)
        elif desired < len(active):
            # starting replicas first (newest first), then the least busy
            order = sorted(active, key=lambda r: (r.ready, r.in_service, -r.ident))
            for replica in order[: len(active) - desired]:
                if replica.in_service == 0:
                    self.stop_replica(now, replica)
                else:
                    replica.draining = True
        self.dispatch(now)

    # -- requests -------------------------------------------------------------------------------
    def arrive(self, now: float, tokens: int) -> None:
        self.window.arrive(now)
        if not self.active() and not self.fixed:
            self.wakes.append(now)
            self.scale_to(now, self.autoscaler.wake(now).desired)
        self._settle_backlog()
        self.waiting.append(_Request(now, tokens, cold=self.starting() or self.backlog_cold))
        self.dispatch(now)

    def dispatch(self, now: float) -> None:
        slots = self.model.slots
        while self.waiting:
            free = [r for r in self.replicas if r.ready and not r.draining and r.in_service < slots]
            if not free:
                break
            replica = min(free, key=lambda r: (r.in_service, r.ident))
            request = self.waiting.popleft()
            replica.in_service += 1
            service = self.model.service_s(self.share, replica.in_service, request.tokens)
            self.schedule(now + service, "done", (replica, request))
        self._settle_backlog()

    def _settle_backlog(self) -> None:
        if self.backlog_cold and not self.starting() and not self.waiting:
            self.backlog_cold = False

    def finish(self, now: float, replica: _Replica, request: _Request) -> None:
        self.window.finish(now)
        replica.in_service -= 1
        self.done.append((request.arrived, now - request.arrived, request.cold))
        if replica.draining and replica.in_service == 0:
            self.stop_replica(now, replica)
        self.dispatch(now)

    def tick(self, now: float) -> None:
        concurrency, rps = self.window.read(now)
        observed = concurrency if self.policy.metric == "concurrency" else rps
        decision = self.autoscaler.decide(now, observed, len(self.active()), waiting=len(self.waiting))
        self.scale_to(now, decision.desired)


def simulate(steps: list[Step], policy: ScalePolicy, share: float, *, model: ServerModel | None = None,
             cold_start_s: float = 20.0, tick_s: float = 2.0, seed: int = 1, tokens: tuple[int, int] = (16, 48),
             fixed: bool = False, sample_s: float = 15.0) -> SimulationResult:
    if not steps or any(s.rate < 0 or s.duration_s <= 0 for s in steps):
        raise ValueError("steps: at least one, each with a rate >= 0 and a duration > 0")
    if cold_start_s < 0 or tick_s <= 0 or sample_s <= 0:
        raise ValueError("cold_start_s >= 0, tick_s > 0 and sample_s > 0")
    model = model or ServerModel()
    rng = random.Random(seed)
    service = _Service(policy, share, model, cold_start_s, fixed)
    bounds, start = [], 0.0
    for step in steps:
        bounds.append((start, start + step.duration_s))
        start += step.duration_s
    end = start
    arrivals: list[float] = []
    for step, (low, high) in zip(steps, bounds, strict=True):
        t = low
        while step.rate > 0:
            t += rng.expovariate(step.rate)
            if t >= high:
                break
            arrivals.append(t)

    for _ in range(policy.max_replicas if fixed else policy.min_replicas):
        service.start_replica(0.0, ready=True)    # already running when the traffic starts
    if not fixed:
        service.schedule(tick_s, "tick")
    arrival_index = 0
    if arrivals:
        service.schedule(arrivals[0], "arrive")
    while service.events:
        now, _, event, payload = heapq.heappop(service.events)
        if event == "arrive":
            service.arrive(now, rng.randint(*tokens))
            arrival_index += 1
            if arrival_index < len(arrivals):
                service.schedule(arrivals[arrival_index], "arrive")
        elif event == "done":
            replica, request = payload  # type: ignore[misc]
            service.finish(now, replica, request)
        elif event == "ready":
            if payload in service.replicas:
                payload.ready = True  # type: ignore[attr-defined]
                service.dispatch(now)
        elif event == "tick" and now <= end:
            service.tick(now)
            if now + tick_s <= end:
                service.schedule(now + tick_s, "tick")
    return _summarise(service, steps, bounds, end, sample_s, share, model)


def _held_integral(changes: list[tuple[float, int]], low: float, high: float) -> float:
    total = 0.0
    for i, (at, held) in enumerate(changes):
        until = changes[i + 1][0] if i + 1 < len(changes) else math.inf
        overlap = min(until, high) - max(at, low)
        if overlap > 0:
            total += held * overlap
    return total


def _held_at(changes: list[tuple[float, int]], t: float) -> int:
    held = 0
    for at, count in changes:
        if at > t:
            break
        held = count
    return held


def _summarise(service: _Service, steps: list[Step], bounds: list[tuple[float, float]], end: float,
               sample_s: float, share: float, model: ServerModel) -> SimulationResult:
    changes = service.held_changes
    results = []
    for step, (low, high) in zip(steps, bounds, strict=True):
        mine = [(latency, cold) for arrived, latency, cold in service.done if low <= arrived < high]
        latencies = [latency for latency, _ in mine]
        warm = [latency for latency, cold in mine if not cold]
        samples = [_held_at(changes, low + k * sample_s) for k in range(max(1, math.ceil((high - low) / sample_s)))]
        in_step = [held for at, held in changes if low <= at < high] + [_held_at(changes, low)]
        area = _held_integral(changes, low, high)
        results.append(StepResult(
            rate=step.rate, start_s=low, end_s=high, requests=len(mine), cold_requests=len(mine) - len(warm),
            p50_s=percentile(latencies, 50), p95_s=percentile(latencies, 95), p95_warm_s=percentile(warm, 95),
            cold_starts=sum(low <= t < high for t in service.wakes),
            replica_starts=sum(low <= t < high for t in service.starts),
            gpu_seconds=area * share, replicas=samples, replicas_min=min(in_step), replicas_max=max(in_step),
            replicas_mean=area / (high - low)))
    everything = [latency for _, latency, _ in service.done]
    warm_all = [latency for _, latency, cold in service.done if not cold]
    in_flight = sum(r.in_service for r in service.replicas) + len(service.waiting)
    return SimulationResult(
        steps=results, share=share, saturated_latency_s=model.saturated_s(share), duration_s=end,
        requests=len(service.done), gpu_seconds=_held_integral(changes, 0.0, end) * share,
        p95_s=percentile(everything, 95), p95_warm_s=percentile(warm_all, 95), cold_starts=len(service.wakes),
        replica_starts=len(service.starts), sample_s=sample_s, unfinished=in_flight)
