"""How long an inference replica takes to answer, on the GPU slice it holds (pure; no Django).

One replica serves up to `slots` requests at once (continuous batching, as vLLM does). A request
that asks for `tokens` output tokens and starts while k requests (itself included) are in service
on its replica takes

    S(share, k, tokens) = (prefill_s + tokens * token_s) * slowdown(share) * (1 + batch_penalty * (k - 1))
    slowdown(share)     = fixed_part + (1 - fixed_part) / share

`share` is the compute the replica holds, in GPUs (`slice_share`): a fraction's gpu_milli / 1000, a
MIG instance's g / 7, one for a whole GPU or a time-sliced slot (nominal), n ** TENSOR_PARALLEL_EXPONENT
for n whole GPUs (tensor parallelism does not scale linearly). `fixed_part` is the time that does not
shrink with more GPU (HTTP, tokenising, scheduling the batch).

Defaults (`ServerModel()`): prefill_s 0.05 s, token_s 6.25 ms (160 tokens/s per sequence on a whole
GPU), tokens 32, fixed_part 0.1, batch_penalty 0.05, slots 8. So one request of 32 tokens alone on a
whole GPU takes 0.25 s, on half a GPU 0.475 s, and with all 8 slots busy on half a GPU 0.64 s.

Saturated latency L_sat(share) = S(share, slots, tokens): every slot busy, nothing queued.
Capacity = slots / L_sat requests per second per replica.

Requests beyond the slots wait, first come first served. The analytic figures (`queue_figures`) treat
r replicas behind one queue as M/M/c with c = r * slots servers of rate mu = 1 / L_sat (every slot at
full batch, so they err on the slow side):
    a = lambda / mu (offered load), rho = a / c (must be < 1, else the queue grows without end)
    Erlang C  P_wait = B / (1 - rho (1 - B)), B the Erlang B value from B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1})
    mean wait Wq = P_wait / (c mu - lambda); mean response = Wq + 1 / mu
    response time T = wait + service: with theta = c mu - lambda,
    P(T > t) = (1 - P_wait) e^(-mu t) + P_wait (mu e^(-theta t) - theta e^(-mu t)) / (mu - theta)
    ((1 + mu t) e^(-mu t) for the second term when theta = mu); quantiles by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MILLI_PER_GPU = 1000
MIG_SLICES = 7
TENSOR_PARALLEL_EXPONENT = 0.8


def slice_share(mode: str, num_gpus: int = 1, gpu_milli: int = MILLI_PER_GPU, mig_profile: str = "") -> float:
    """The compute a replica holds, in GPUs, from its core request (mode, num_gpus, gpu_milli, mig_profile)."""
    if mode == "fraction":
        share = gpu_milli / MILLI_PER_GPU
    elif mode == "mig":
        share = int(mig_profile.split("g.", 1)[0]) / MIG_SLICES
    elif num_gpus < 1:
        share = 0.0
    elif num_gpus > 1:
        share = num_gpus ** TENSOR_PARALLEL_EXPONENT
    else:
        share = 1.0
    if not share > 0:
        raise ValueError(f"a replica needs some GPU to serve a model (mode {mode}, {num_gpus} GPUs)")
    return share


@dataclass(frozen=True)
class ServerModel:
    prefill_s: float = 0.05
    token_s: float = 0.00625
    tokens: int = 32
    fixed_part: float = 0.1
    batch_penalty: float = 0.05
    slots: int = 8

    def __post_init__(self) -> None:
        if self.prefill_s < 0 or self.token_s < 0 or self.prefill_s + self.token_s <= 0:
            raise ValueError("prefill_s and token_s must be >= 0, and not both 0")
        if not 0 <= self.fixed_part < 1:
            raise ValueError("fixed_part must be in [0, 1)")
        if self.batch_penalty < 0 or self.slots < 1 or self.tokens < 1:
            raise ValueError("batch_penalty >= 0, slots >= 1 and tokens >= 1")

    def slowdown(self, share: float) -> float:
        if share <= 0:
            raise ValueError("share must be above 0")
        return self.fixed_part + (1 - self.fixed_part) / share

    def service_s(self, share: float, in_service: int = 1, tokens: int | None = None) -> float:
        """S(share, k, tokens): one request's time in service, k = requests in service with it included."""
        tokens = self.tokens if tokens is None else tokens
        k = max(1, min(in_service, self.slots))
        work = self.prefill_s + tokens * self.token_s
        return work * self.slowdown(share) * (1 + self.batch_penalty * (k - 1))

    def phases_s(self, share: float, in_service: int = 1, tokens: int | None = None) -> tuple[float, float]:
        """(prefill, decode) seconds of one request: `service_s` split by the part of its work each phase
        is (prefill_s, and tokens * token_s). What the cost of a slice is split by between prompt and
        completion tokens, as vLLM's request_prefill_time_seconds and request_decode_time_seconds do."""
        tokens = self.tokens if tokens is None else tokens
        total = self.service_s(share, in_service, tokens)
        work = self.prefill_s + tokens * self.token_s
        prefill = total * self.prefill_s / work
        return prefill, total - prefill

    def pace_s(self, share: float, in_service: int) -> tuple[float, float]:
        """(prefill seconds, seconds per output token) under S(share, k): how a streamed answer paces its
        tokens; prefill + tokens * per token == service_s, as phases_s splits it."""
        k = max(1, min(in_service, self.slots))
        scale = self.slowdown(share) * (1 + self.batch_penalty * (k - 1))
        return self.prefill_s * scale, self.token_s * scale

    def saturated_s(self, share: float) -> float:
        """L_sat: the latency of a request on a replica whose every slot is busy, before any queue."""
        return self.service_s(share, self.slots)

    def capacity_rps(self, share: float) -> float:
        """Requests per second one replica finishes when it is saturated."""
        return self.slots / self.saturated_s(share)


DEFAULT_MODEL = ServerModel()


@dataclass(frozen=True)
class QueueFigures:
    utilisation: float          # rho
    wait_probability: float     # Erlang C
    mean_s: float               # mean response time (inf when rho >= 1)
    p95_s: float                # 95th percentile of the response time


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with c = servers and a = offered load."""
    if servers < 1:
        raise ValueError("servers must be >= 1")
    if offered <= 0:
        return 0.0
    rho = offered / servers
    if rho >= 1:
        return 1.0
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    return blocking / (1 - rho * (1 - blocking))


def _response_tail(t: float, mu: float, theta: float, wait_probability: float) -> float:
    served = math.exp(-mu * t)
    if abs(mu - theta) < 1e-12 * mu:
        both = (1 + mu * t) * served
    else:
        both = (mu * math.exp(-theta * t) - theta * served) / (mu - theta)
    return (1 - wait_probability) * served + wait_probability * both


def queue_figures(rate: float, replicas: int, share: float, model: ServerModel | None = None,
                  quantile: float = 0.95) -> QueueFigures:
    """M/M/c figures for `replicas` replicas (c = replicas * slots) at `rate` requests per second."""
    model = model or DEFAULT_MODEL
    if replicas < 1:
        raise ValueError("replicas must be >= 1")
    mu = 1 / model.saturated_s(share)
    servers = replicas * model.slots
    if rate <= 0:
        return QueueFigures(0.0, 0.0, 1 / mu, -math.log(1 - quantile) / mu)
    offered = rate / mu
    rho = offered / servers
    if rho >= 1:
        return QueueFigures(rho, 1.0, math.inf, math.inf)
    wait = erlang_c(servers, offered)
    theta = servers * mu - rate
    mean = wait / theta + 1 / mu
    low, high = 0.0, 1 / mu
    while _response_tail(high, mu, theta, wait) > 1 - quantile:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if _response_tail(middle, mu, theta, wait) > 1 - quantile:
            low = middle
        else:
            high = middle
    return QueueFigures(rho, wait, mean, high)


def replicas_for_rate(rate: float, share: float, model: ServerModel | None = None, *,
                      utilisation: float = 0.75) -> int:
    """Replicas that keep every slot below `utilisation` at `rate` requests per second (0 for no traffic):
    what a service settles at for a steady rate, for quotes at a stated request rate."""
    model = model or DEFAULT_MODEL
    if rate <= 0:
        return 0
    if not 0 < utilisation <= 1:
        raise ValueError("utilisation must be in (0, 1]")
    return math.ceil(rate / (model.capacity_rps(share) * utilisation) - 1e-9)


def replicas_at_rate(rate: float, share: float, *, metric: str, target: float, low: int, high: int,
                     model: ServerModel | None = None) -> int:
    """The replicas a service settles at for a steady `rate` requests per second: what its autoscaler
    asks for by its target (rps: rate / target; concurrency: rate * latency / target, by Little's law,
    at the latency of `target` requests in service together), at least what keeps the replicas below
    saturation (`replicas_for_rate`), within [low, high] and one at least while there is traffic."""
    model = model or DEFAULT_MODEL
    if rate <= 0:
        return low
    if metric == "rps":
        wanted = math.ceil(rate / target - 1e-9)
    else:
        wanted = math.ceil(rate * model.service_s(share, max(1, math.floor(target))) / target - 1e-9)
    return max(low, 1, min(high, max(wanted, replicas_for_rate(rate, share, model))))
