"""One inference service under a stepped request rate: autoscaled replicas against a fixed deployment.

    python -m bench.inference                       # 0 -> 50 -> 200 -> 0 req/s, 150 s each (10 minutes)
    python -m bench.inference --metric concurrency --target 6 --json
    python -m bench.inference --clients openai --duration 300 --pattern diurnal --json   # bench/inference_openai.py

Simulated time (discrete events, no sleeps) with the production rules: `scheduling/serving/latency.py`
(each request's time on the replica's GPU slice, slots, queueing) and `scheduling/serving/autoscaler.py`
(evaluated every `--tick` seconds, scale-down after `--scale-down-delay`, a cold start from zero), run by
`scheduling/serving/simulate.py`. Per step it prints the replicas held over time (sampled every
`--sample` s), p50 and p95 latency (all requests, and "warm": without those that arrived during a cold
start or its backlog), cold starts (wakes from zero) and replica starts, the GPU-seconds held and what
a fixed deployment of `--max` replicas would hold for the same traffic (`--max` x slice x seconds),
with the fixed deployment's own p95. Target: under half of the fixed deployment's GPU-seconds, with
every step's warm p95 within 2x the saturated single-replica latency (L_sat). Also the wall and CPU
seconds the simulation took.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from scheduling.serving.autoscaler import ScalePolicy
from scheduling.serving.latency import ServerModel
from scheduling.serving.simulate import SimulationResult, Step, simulate


def run(args: argparse.Namespace) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    steps = [Step(rate, args.step_s) for rate in args.steps]
    policy = ScalePolicy(args.min, args.max, args.metric, args.target, args.scale_down_delay)
    model = ServerModel(slots=args.slots)
    common = dict(model=model, cold_start_s=args.cold_start, tick_s=args.tick, seed=args.seed, sample_s=args.sample)
    scaled = simulate(steps, policy, args.share, **common)
    fixed = simulate(steps, policy, args.share, fixed=True, **common)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return report(args, scaled, fixed, wall, cpu)


def report(args: argparse.Namespace, scaled: SimulationResult, fixed: SimulationResult, wall: float,
           cpu: float) -> dict:
    bound = 2 * scaled.saturated_latency_s
    rows = []
    for mine, theirs in zip(scaled.steps, fixed.steps, strict=True):
        row = asdict(mine)
        row["fixed_gpu_seconds"] = theirs.gpu_seconds
        row["fixed_p95_s"] = theirs.p95_s
        rows.append(row)
    warm = [r["p95_warm_s"] for r in rows if r["p95_warm_s"] is not None]
    latency_ok = all(p <= bound for p in warm)
    ratio = scaled.gpu_seconds / fixed.gpu_seconds if fixed.gpu_seconds else None
    return {
        "service": {"share": args.share, "min": args.min, "max": args.max, "metric": args.metric,
                    "target": args.target, "scale_down_delay_s": args.scale_down_delay, "cold_start_s": args.cold_start,
                    "tick_s": args.tick, "slots": args.slots, "seed": args.seed, "sample_s": args.sample},
        "saturated_latency_s": scaled.saturated_latency_s,
        "p95_bound_s": bound,
        "steps": rows,
        "total": {"requests": scaled.requests, "gpu_seconds": scaled.gpu_seconds, "fixed_gpu_seconds": fixed.gpu_seconds,
                  "gpu_seconds_ratio": ratio, "p95_s": scaled.p95_s, "p95_warm_s": scaled.p95_warm_s,
                  "fixed_p95_s": fixed.p95_s, "cold_starts": scaled.cold_starts,
                  "replica_starts": scaled.replica_starts, "unfinished": scaled.unfinished},
        "target": {"under_half_of_fixed": ratio is not None and ratio < 0.5, "warm_p95_within_2x_saturated": latency_ok},
        "wall_s": wall,
        "cpu_s": cpu,
    }


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(result: dict) -> None:
    service = result["service"]
    print(f"service: {service['share']:g} GPU per replica, replicas {service['min']}..{service['max']}, target "
          f"{service['metric']} {service['target']:g} per replica, scale-down delay {service['scale_down_delay_s']:g} s, "
          f"cold start {service['cold_start_s']:g} s, {service['slots']} slots per replica")
    print(f"saturated single-replica latency L_sat {result['saturated_latency_s']:.3f} s; p95 bound 2 x L_sat "
          f"{result['p95_bound_s']:.3f} s")
    held_title = f"replicas held (every {service['sample_s']:g} s)"
    print(f"{'step':>4} {'req/s':>6} {'requests':>8} {held_title:<42} {'mean':>5} {'p50 s':>6} "
          f"{'p95 s':>6} {'warm p95':>8} {'cold req':>8} {'cold starts':>11} {'starts':>6} {'GPU-s':>7} "
          f"{'fixed GPU-s':>11} {'fixed p95':>9}")
    for i, row in enumerate(result["steps"], 1):
        held = " ".join(str(n) for n in row["replicas"])
        print(f"{i:>4} {row['rate']:>6g} {row['requests']:>8} {held:<42} {row['replicas_mean']:>5.1f} "
              f"{_s(row['p50_s']):>6} {_s(row['p95_s']):>6} {_s(row['p95_warm_s']):>8} {row['cold_requests']:>8} "
              f"{row['cold_starts']:>11} {row['replica_starts']:>6} {row['gpu_seconds']:>7.0f} "
              f"{row['fixed_gpu_seconds']:>11.0f} {_s(row['fixed_p95_s']):>9}")
    total, target = result["total"], result["target"]
    ratio = total["gpu_seconds_ratio"]
    print(f"total: {total['requests']} requests, {total['gpu_seconds']:.0f} GPU-s against {total['fixed_gpu_seconds']:.0f} "
          f"fixed ({'-' if ratio is None else f'{ratio:.1%}'}); p95 {_s(total['p95_s'])} s, warm p95 "
          f"{_s(total['p95_warm_s'])} s, fixed p95 {_s(total['fixed_p95_s'])} s; {total['cold_starts']} cold starts, "
          f"{total['replica_starts']} replica starts")
    print(f"target: under half the fixed GPU-seconds: {'yes' if target['under_half_of_fixed'] else 'no'}; "
          f"warm p95 within 2 x L_sat in every step: {'yes' if target['warm_p95_within_2x_saturated'] else 'no'}")
    print(f"simulation: {result['wall_s']:.2f} s wall, {result['cpu_s']:.2f} s CPU")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=lambda s: [float(x) for x in s.split(",")], default=[0, 50, 200, 0],
                        help="request rates of the steps, e.g. 0,50,200,0")
    parser.add_argument("--step-s", type=float, default=150.0, help="seconds per step (4 x 150 s = 10 minutes)")
    parser.add_argument("--share", type=float, default=0.5, help="GPU share per replica (0.5: half a GPU)")
    parser.add_argument("--min", type=int, default=0)
    parser.add_argument("--max", type=int, default=None, help="most replicas (24; openai: 3)")
    parser.add_argument("--metric", choices=("concurrency", "rps"), default="rps")
    parser.add_argument("--target", type=float, default=None,
                        help="per replica: requests/s, or requests in flight (8; openai: 4 in flight)")
    parser.add_argument("--scale-down-delay", type=float, default=60.0)
    parser.add_argument("--cold-start", type=float, default=20.0, help="seconds from a replica's start to ready")
    parser.add_argument("--tick", type=float, default=2.0, help="seconds between autoscaler evaluations")
    parser.add_argument("--slots", type=int, default=ServerModel().slots)
    parser.add_argument("--sample", type=float, default=15.0, help="seconds between the replica samples printed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--clients", choices=("model", "openai"), default="model",
                        help="model: the simulated day above; openai: the openai SDK, streaming, through the portal")
    parser.add_argument("--duration", type=float, default=300.0, help="openai: seconds of the run (one compressed day)")
    parser.add_argument("--pattern", choices=("diurnal", "flat"), default="diurnal", help="openai: the rate over the run")
    parser.add_argument("--peak-rps", type=float, default=6.0, help="openai: requests per second at the day's peak")
    parser.add_argument("--workers", type=int, default=64, help="openai: client threads")
    args = parser.parse_args(argv)
    openai_mode = args.clients == "openai"
    args.max = args.max if args.max is not None else (3 if openai_mode else 24)
    args.target = args.target if args.target is not None else (4 if openai_mode else 8.0)
    if not args.steps or any(rate < 0 for rate in args.steps):
        parser.error("--steps: request rates >= 0")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.clients == "openai":   # real clients through the real portal (bench/inference_openai.py)
        from bench import inference_openai

        result = inference_openai.run(args)
        print(json.dumps(result, indent=2) if args.json else "", end="\n" if args.json else "")
        if not args.json:
            inference_openai.print_table(result)
        return result
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return result


if __name__ == "__main__":
    main()
