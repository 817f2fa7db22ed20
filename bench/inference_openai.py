"""`python -m bench.inference --clients openai`: real clients through the real portal.

    python -m bench.inference --clients openai --duration 300 --pattern diurnal --json

Everything is throwaway and on 127.0.0.1 (as bench.live): a temporary SQLite database (migrated, the
demo's tenants, cluster and prices), the embedded Redis, one Daphne serving the portal, and scheduling
cycles in a thread of this process on the simulated backend, whose replicas are real server processes
(scheduling/backends/simulated/inference_server.py: tokens at the latency model's pace).

Two services take the same traffic at once: `scaled` (replicas 0..--max, concurrency target, a short
scale-down delay, compressed as the day is) and `fixed` (--max replicas always). Each has its own key.
The load is the official `openai` SDK in streaming mode (chat completions, stream_options.include_usage):
Poisson arrivals whose rate follows a day curve compressed to --duration (--pattern diurnal: night near
zero, a morning rise, an afternoon peak of --peak-rps; --pattern flat: --peak-rps throughout), prompt and
output lengths from a fixed distribution (PROMPTS, OUTPUTS), the same arrival times and lengths sent to
both services.

Reported: per service, requests, answered, 429s, lost (no answer, or a 5xx), TTFT p50/p95 as the clients
measured it, tokens, GPU-seconds held (running replicas x their share, sampled every 0.25 s); the
scaled service's cold starts (and the longest, as the portal recorded it); cost per 1M tokens for
exclusive, fraction (half a GPU) and time-sliced replicas at the price table's rates, from the
GPU-seconds held (for the fraction and time-sliced options, those seconds at their share of a GPU).
Targets: scaled GPU-seconds < 0.5 of fixed, at a TTFT p95 within 2x fixed's; cold start < 5 s; 0 lost.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PROMPTS = ((16, 0.5), (64, 0.35), (256, 0.15))     # prompt words, probability
OUTPUTS = ((16, 0.3), (64, 0.5), (128, 0.2))       # max_tokens, probability
SPEC = """\
kind: inference
name: {name}
queue: vision-lab
nodePool: h100
model: {{path: /models/llm, name: llm}}
resources: {{gpu: 1}}
replicas: {{min: {low}, max: {high}}}
target: {{concurrency: {target}}}
scaleDownDelay: {delay}s
"""


def day_rate(t: float, duration: float, peak: float, pattern: str) -> float:
    """Requests per second at `t` of a day compressed to `duration`: near zero at night (the first and
    last fifth), rising to `peak` in the afternoon."""
    if pattern == "flat":
        return peak
    hour = 24 * t / duration
    if hour < 5 or hour > 22:
        return 0.0
    return peak * math.sin(math.pi * (hour - 5) / 17) ** 2


def arrivals(duration: float, peak: float, pattern: str, seed: int) -> list[tuple[float, int, int]]:
    """(time, prompt words, max_tokens) of a Poisson process of rate day_rate (thinning)."""
    rng = random.Random(seed)
    out, t = [], 0.0
    while peak > 0:
        t += rng.expovariate(peak)
        if t >= duration:
            break
        if rng.random() * peak <= day_rate(t, duration, peak, pattern):
            prompt = rng.choices([p for p, _ in PROMPTS], [w for _, w in PROMPTS])[0]
            output = rng.choices([o for o, _ in OUTPUTS], [w for _, w in OUTPUTS])[0]
            out.append((t, prompt, output))
    return out


@dataclass
class Tally:
    ttft: list[float] = field(default_factory=list)
    answered: int = 0
    limited: int = 0
    lost: int = 0
    tokens: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def call(client, prompt: int, output: int, tally: Tally) -> None:
    import openai

    started = time.monotonic()
    first, usage = None, None
    try:
        stream = client.chat.completions.create(
            model="llm", messages=[{"role": "user", "content": " ".join(["word"] * prompt)}], max_tokens=output,
            stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            if first is None:
                first = time.monotonic() - started
            if chunk.usage is not None:
                usage = chunk.usage
    except openai.RateLimitError:
        with tally.lock:
            tally.limited += 1
        return
    except Exception as error:  # no answer or a 5xx: lost
        with tally.lock:
            tally.lost += 1
            tally.errors.append(f"{type(error).__name__}: {str(error)[:120]}")
        return
    with tally.lock:
        if usage is None or first is None:
            tally.lost += 1
            tally.errors.append("a stream ended without its usage")
            return
        tally.answered += 1
        tally.ttft.append(first)
        tally.tokens += usage.total_tokens


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)]


def prepare(tmp: Path) -> None:
    from bench.live import configure_environment

    configure_environment(tmp, None)
    os.environ.update(SERVICE_SCALE_INTERVAL_S="0", SIM_INFERENCE_STARTUP_S=os.environ.get("SIM_INFERENCE_STARTUP_S",
                                                                                           "2"))
    import django

    django.setup()
    from django.core.management import call_command

    from portal.demo import cluster, prices, tenants

    call_command("migrate", verbosity=0, interactive=False)
    tenants.load_tenants()
    cluster.load_cluster()
    cluster.load_queues()
    prices.load_prices()


def rates() -> dict[str, float]:
    """USD per GPU-hour of the demo's price table by GPU model."""
    from billing.models import GpuRate

    return {r.gpu_model: float(r.per_gpu_hour) for r in GpuRate.objects.all()}


def run(args) -> dict:
    from bench.live import Stack, start_stack

    tmp = Path(tempfile.mkdtemp(prefix="bench-inference-"))
    stack = Stack(tmp=tmp, redis_url="")
    prepare(tmp)
    from portal import embedded_redis

    stack.redis_url = os.environ["REDIS_URL"]
    stack.redis_proc = embedded_redis.start(stack.redis_url, log_file=tmp / "redis.log")
    import openai
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from portal import service_keys
    from portal.models import Workspace
    from scheduling import services
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import JobEvent, JobState, ServiceScale

    user = get_user_model().objects.get(username="alice")
    workspace = Workspace.objects.get(slug="vision-lab")
    delay = max(2, round(args.duration / 30))
    scaled = services.submit_job(user=user, workspace=workspace, spec=SPEC.format(
        name="scaled", low=0, high=args.max, target=int(args.target), delay=delay))
    fixed = services.submit_job(user=user, workspace=workspace, spec=SPEC.format(
        name="fixed", low=args.max, high=args.max, target=int(args.target), delay=delay))
    keys = {job.name: service_keys.create_key(user, job, "bench", days=0)[1] for job in (scaled, fixed)}
    backend = SimulatedBackend(speedup=1, failure_rate=0, server_startup_s=settings.SIM_INFERENCE_STARTUP_S)
    stop = threading.Event()
    held = {"scaled": 0.0, "fixed": 0.0}

    def cycles():
        try:
            while not stop.is_set():
                run_scheduling_cycle(backend)
                stop.wait(0.2)
        finally:
            connection.close()

    def sampler():
        from scheduling.models import Replica

        last = time.monotonic()
        try:
            while not stop.is_set():
                stop.wait(0.25)
                now = time.monotonic()
                for job in (scaled, fixed):
                    running = Replica.objects.filter(job=job, state=JobState.RUNNING).count()
                    held[job.name] += running * (now - last)   # whole GPUs: share 1
                last = now
        finally:
            connection.close()

    cycling = threading.Thread(target=cycles, daemon=True)
    cycling.start()
    try:
        slow_s = 240   # a busy machine starts processes slowly
        base = start_stack(stack, own_redis=False, start_timeout_s=slow_s)
        deadline = time.monotonic() + slow_s
        while fixed.replicas.filter(state=JobState.RUNNING).count() < args.max:
            if time.monotonic() > deadline:
                raise SystemExit("bench.inference: the fixed deployment never started")
            time.sleep(0.2)
        # the scaled one starts with a replica and goes to zero after its delay: the day starts at night
        while type(scaled).objects.get(pk=scaled.pk).state != JobState.STOPPED and time.monotonic() < deadline + 60:
            time.sleep(0.2)
        clients = {name: openai.OpenAI(base_url=f"{base}/serve/vision-lab/{name}/v1", api_key=key, max_retries=0,
                                       timeout=120) for name, key in keys.items()}
        tallies = {"scaled": Tally(), "fixed": Tally()}
        plan = arrivals(args.duration, args.peak_rps, args.pattern, args.seed)
        sampling = threading.Thread(target=sampler, daemon=True)
        sampling.start()
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            for at, prompt, output in plan:
                wait = started + at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                for name in ("scaled", "fixed"):
                    pool.submit(call, clients[name], prompt, output, tallies[name])
            leftover = started + args.duration - time.monotonic()
            if leftover > 0:
                time.sleep(leftover)
        stop.set()
        sampling.join(10)
        cold = [e.data.get("seconds") for e in JobEvent.objects.filter(job=scaled, kind="cold-start")]
        cold_starts = ServiceScale.objects.get(job=scaled).cold_starts
    finally:
        stop.set()
        cycling.join(30)
        backend.runtime.stop_all()   # before the stack's folder (and the records of its servers) is removed
        stack.stop()
        for job in (scaled, fixed):
            try:
                services.cancel_job(user=user, job=type(job).objects.get(pk=job.pk))
                run_scheduling_cycle(backend)
            except Exception:  # the benchmark's own processes go with it whatever happens
                pass
    return report(args, tallies, held, cold, cold_starts, len(plan), rates())


def report(args, tallies: dict[str, Tally], held: dict[str, float], cold: list, cold_starts: int, planned: int,
           rate_table: dict[str, float]) -> dict:
    services = {}
    for name, tally in tallies.items():
        services[name] = {
            "requests": planned, "answered": tally.answered, "rate_limited": tally.limited, "lost": tally.lost,
            "ttft_p50_s": quantile(tally.ttft, 0.5), "ttft_p95_s": quantile(tally.ttft, 0.95),
            "tokens": tally.tokens, "gpu_seconds": round(held[name], 1), "errors": tally.errors[:5],
        }
    scaled, fixed = services["scaled"], services["fixed"]
    ratio = scaled["gpu_seconds"] / fixed["gpu_seconds"] if fixed["gpu_seconds"] else None
    h100, l40s = rate_table.get("H100-80GB", 0.0), rate_table.get("L40S-48GB", 0.0)

    def per_million(gpu_seconds: float, per_gpu_hour: float, share: float) -> float | None:
        tokens = scaled["tokens"]
        return None if not tokens else round(gpu_seconds / 3600 * per_gpu_hour * share / tokens * 1e6, 4)

    cost = {"exclusive": per_million(scaled["gpu_seconds"], h100, 1.0),
            "fraction": per_million(scaled["gpu_seconds"], h100, 0.5),
            "timeslice": per_million(scaled["gpu_seconds"], l40s, 0.25)}
    worst_cold = max((c for c in cold if c is not None), default=None)
    p95s = (scaled["ttft_p95_s"], fixed["ttft_p95_s"])
    return {
        "run": {"duration_s": args.duration, "pattern": args.pattern, "peak_rps": args.peak_rps, "max": args.max,
                "target_concurrency": args.target, "seed": args.seed, "planned_requests": planned},
        "services": services,
        "gpu_seconds_ratio": None if ratio is None else round(ratio, 3),
        "cold_starts": cold_starts, "cold_start_max_s": worst_cold,
        "cost_per_million_tokens_usd": cost,
        "target": {
            "under_half_of_fixed": ratio is not None and ratio < 0.5,
            "ttft_p95_within_2x_fixed": None not in p95s and p95s[0] <= 2 * p95s[1],
            "cold_start_under_5s": worst_cold is not None and worst_cold < 5,
            "nothing_lost": scaled["lost"] == 0 and fixed["lost"] == 0,
        },
    }


def print_table(result: dict) -> None:
    run = result["run"]
    print(f"{run['duration_s']:g} s {run['pattern']} day, peak {run['peak_rps']:g} req/s, {run['planned_requests']} "
          f"requests to each service; scaled 0..{run['max']} vs fixed {run['max']} replicas")
    print(f"{'service':<8} {'answered':>8} {'429':>5} {'lost':>5} {'TTFT p50':>9} {'TTFT p95':>9} {'tokens':>8} "
          f"{'GPU-s':>8}")
    for name, s in result["services"].items():
        p50 = "-" if s["ttft_p50_s"] is None else f"{s['ttft_p50_s']:.3f}"
        p95 = "-" if s["ttft_p95_s"] is None else f"{s['ttft_p95_s']:.3f}"
        print(f"{name:<8} {s['answered']:>8} {s['rate_limited']:>5} {s['lost']:>5} {p50:>9} {p95:>9} "
              f"{s['tokens']:>8} {s['gpu_seconds']:>8.1f}")
    print(f"GPU-seconds scaled/fixed: {result['gpu_seconds_ratio']}; cold starts {result['cold_starts']} "
          f"(longest {result['cold_start_max_s']} s)")
    print("cost per 1M tokens (USD): " + ", ".join(f"{k} {v}" for k, v in
                                                  result["cost_per_million_tokens_usd"].items()))
    print("targets: " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in result["target"].items()))
