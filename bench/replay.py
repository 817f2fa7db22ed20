"""Time replay of a job trace through the production scheduler core: silos against one shared pool.

    python -m bench.replay --trace trace_job_Philly_MIX1.csv \\
        --mode silos|pool|pool-besteffort|all --gpus N [--find-min-gpus --p95-wait 60] \\
        [--gpus-per-node 8] [--cycle-s 10] [--checkpoint-min 30] [--json]

Every job goes through `scheduling/core/replay.py` (`Replay`): at each cycle point the engine builds a
core Snapshot and calls `core.cycle.run_cycle`, the Celery cycle's own call, so which job starts, where,
and who is evicted are the production scheduler's decisions. Cycles run every `--cycle-s` of simulated
time and the moment jobs arrive or end; points where nothing changed are skipped.

Modes (nodes of `--gpus-per-node` GPUs in one pool; a job bigger than a node is a gang of identical
replicas, `scheduling.traces.gang`):
- `silos`: each team its own cluster and queue, its jobs first come first served.
- `pool`: one cluster; one queue per team deserving a share of the GPUs in proportion to its silo, over-quota
  use allowed (so every job is preemptible: the core keeps non-preemptible work within deserved quotas);
  a team below its share reclaims, and an evicted job loses its work since its last checkpoint.
- `pool-besteffort`: the same, and the trace's best-effort jobs go to a queue of their team's that deserves
  nothing, has no over-quota weight and the lowest queue priority: they run on what nobody else uses and
  are the first evicted when any team reclaims.

Deadline jobs (`job_type: soft`, the first `expect_time_list` entry their deadline from submission; or a
trace softened by `python -m bench.traces --soften`) go to their team's queue in every mode with their latest
start (the deadline less the work left less `--deadline-margin` (0.1) of the run time): before it they take
idle GPUs and are evicted like best-effort work, from it on they are strict (`scheduling.core.deadline`).

`--find-min-gpus` searches the fewest whole nodes at which every team's p95 wait of its strict jobs is at
most `--p95-wait`, at least `--deadline-share` (99 %) of the deadline jobs are done by their deadlines, and
every best-effort job is done within `--span-factor` (1.5) times the trace's span
(first submission to last end, were every job to start at once). In `silos` each team's cluster is searched
and `min_gpus` is their sum; the pools' queues deserve shares in proportion to those silos. A size is
given up as soon as the target is out of reach (more late strict jobs than the p95 allows, or the span
passed with best-effort work left), so small sizes cost little. The search assumes more GPUs never make
the waits worse.

Output: per team and in total, p50/p95 wait and completion, utilisation (GPU-hours held over capacity x
makespan; a pool team's capacity is its deserved share), GPU-hours, makespan, preemptions and the GPU-hours
they lost, the share of deadline jobs done by their deadlines, best-effort completion; wall and CPU seconds. `--json`: one JSON object, the last line printed.
One size (`--gpus`), pools: `--decisions-hash` adds `decisions_sha256`, a digest of every cycle's time,
evictions (with their causes) and binds, to check that a change decides exactly as before; `--until-s S`
replays only the trace's first S simulated seconds (to profile; the target then counts as missed).
`--trace-format alibaba` replays the Alibaba GPU-sharing pods instead (bench/replay_pods.py).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduling.core import Decisions, Pool, Queue, Snapshot
from scheduling.core.builders import nodes as make_nodes
from scheduling.core.replay import JobResult, Replay, ReplayJob
from scheduling.traces import (
    Figures,
    TraceJob,
    figures,
    gang,
    late_allowed,
    peak_demand,
    read_philly,
    read_philly_file,
    span,
)

MODES = ("silos", "pool", "pool-besteffort")
POOL = "gpu"
BEST_EFFORT_SUFFIX = ":best-effort"
CHECK_EVERY_S = 600.0      # simulated seconds between checks that the target is still in reach


@dataclass(frozen=True)
class Settings:
    gpus_per_node: int = 8
    cycle_s: float = 10.0
    checkpoint_s: float | None = 1800.0
    wait_target_s: float = 60.0
    span_factor: float = 1.5
    on_events: bool = True          # a cycle also the moment jobs arrive or end (False: on the beat's ticks only)
    deadline_share: float = 0.99    # of deadline jobs done by their deadlines
    deadline_margin: float = 0.1    # of a deadline job's run time, kept before its deadline


@dataclass
class Outcome:
    """One replay of one layout: per-job results, whether it met the target, the figures."""

    mode: str
    gpus: int                                   # cluster GPUs (silos: their sum)
    feasible: bool
    why: str                                    # what failed, or ""
    results: dict[str, JobResult]
    team_gpus: dict[str, int] = field(default_factory=dict)   # silo sizes, or pool teams' deserved GPUs
    cycles: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def figures(self, trace: list[TraceJob]) -> tuple[dict[str, Figures], Figures]:
        origin, _ = span(trace)
        gpus = {j.id: j.gpus for j in trace}
        durations = {j.id: j.duration for j in trace}
        be = [j.id for j in trace if j.best_effort]
        deadlines = {j.id: j.deadline for j in trace if j.deadline is not None}
        by_team: dict[str, list[JobResult]] = defaultdict(list)
        for j in trace:
            if j.id in self.results:
                by_team[j.team].append(self.results[j.id])
        teams = {t: figures(rs, gpus, durations, best_effort=be, capacity_gpus=self.team_gpus.get(t, 0),
                            origin=origin, deadlines=deadlines) for t, rs in sorted(by_team.items())}
        total = figures(self.results.values(), gpus, durations, best_effort=be, capacity_gpus=self.gpus, origin=origin,
                        deadlines=deadlines)
        return teams, total


# --------------------------------------------------------------------------- layouts


def gpu_jobs(trace: Iterable[TraceJob]) -> list[TraceJob]:
    """The jobs that ask for GPUs (CPU-only lines say nothing about GPUs saved)."""
    return [j for j in trace if j.gpus > 0]


def replay_jobs(trace: Iterable[TraceJob], mode: str, s: Settings) -> list[ReplayJob]:
    out = []
    for j in trace:
        per, replicas = gang(j.gpus, s.gpus_per_node)
        queue = j.team + BEST_EFFORT_SUFFIX if (j.best_effort and mode == "pool-besteffort") else j.team
        deadline = None if j.deadline is None else j.submit + j.deadline
        out.append(ReplayJob.simple(j.id, queue, per, j.submit, j.duration, replicas=replicas, created=j.submit,
                                    preemptible=mode != "silos", checkpoint_s=s.checkpoint_s, deadline=deadline,
                                    margin_s=s.deadline_margin * j.duration))
    return out


def cluster(node_count: int, queues: Iterable[Queue], s: Settings) -> Snapshot:
    # no backfill reservations: the trace figures compare layouts as they were measured
    return Snapshot(pools=(Pool(POOL),), nodes=make_nodes(POOL, node_count, s.gpus_per_node), queues=tuple(queues),
                    jobs=(), backfill_patience_s=None)


def deserved_shares(total_gpus: int, silo_gpus: dict[str, int]) -> dict[str, int]:
    """Each team's deserved GPUs in a pool of `total_gpus`: in proportion to its silo, whole GPUs by the
    largest remainder, summing to the pool."""
    whole = sum(silo_gpus.values())
    exact = {t: total_gpus * g / whole for t, g in silo_gpus.items()}
    out = {t: math.floor(x) for t, x in exact.items()}
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[: total_gpus - sum(out.values())]:
        out[t] += 1
    return out


def pool_queues(total_gpus: int, silo_gpus: dict[str, int], mode: str) -> list[Queue]:
    queues = [Queue(t, deserved_milli=g * 1000) for t, g in deserved_shares(total_gpus, silo_gpus).items()]
    if mode == "pool-besteffort":
        queues += [Queue(t + BEST_EFFORT_SUFFIX, deserved_milli=0, over_quota_weight=0.0, priority=-1)
                   for t in silo_gpus]
    return queues


# --------------------------------------------------------------------------- one size


class DecisionsDigest:
    """A running digest of every cycle's time, evictions (with their causes) and binds: two replays that
    decide the same, cycle by cycle, end with the same digest."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.cycles = 0

    def __call__(self, at: float, snapshot: Snapshot, decisions: Decisions) -> None:
        self.digest.update(repr((at, decisions.evicts, decisions.binds)).encode())
        self.cycles += 1

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def replay_until_known(snapshot: Snapshot, jobs: list[ReplayJob], trace: list[TraceJob], s: Settings, *,
                       stop_early: bool, window: tuple[float, float] | None = None,
                       digest: DecisionsDigest | None = None, until_s: float | None = None) -> tuple[dict[str, JobResult], bool, str, int]:
    """Replay `jobs` to the end, or with `stop_early` only until the target is out of reach. Returns the
    results, whether the target was met, why not, and the cycles run. `window`: the whole trace's origin
    and span (default: those of `trace`). `digest`: hashes every cycle's decisions. `until_s`: only the first that many simulated seconds (a
    profile's prefix; the target then counts as missed)."""
    origin, length = window or span(trace)
    deadline = origin + s.span_factor * length
    strict: dict[str, list[str]] = defaultdict(list)
    be = [j.id for j in trace if j.best_effort]
    for j in trace:
        if j.kind == "strict":
            strict[j.team].append(j.id)
    allowed = {t: late_allowed(len(ids)) for t, ids in strict.items()}
    due = {j.id: j.submit + j.deadline for j in trace if j.deadline is not None}
    late_deadlines = late_allowed(len(due), s.deadline_share * 100)
    engine = Replay(snapshot, jobs, start=min((j.submit_time for j in jobs), default=0.0), cycle_s=s.cycle_s,
                    on_events=s.on_events, on_cycle=digest, reasons=False)
    # the trace and the engine's jobs live to the end: out of the collector's full passes, which would
    # otherwise walk them again and again (a tenth of a replay)
    gc.freeze()

    def missed(now: float | None) -> str:
        res = engine.jobs
        for team, ids in strict.items():
            late = 0
            for jid in ids:
                r = res[jid].result
                if r.start is not None:
                    late += r.start - r.submit_time > s.wait_target_s
                elif now is None or now - r.submit_time > s.wait_target_s:
                    late += 1
            if late > allowed[team]:
                return f"team {team}: more than {allowed[team]} of {len(ids)} strict jobs waited over " \
                       f"{s.wait_target_s:g} s"
        late = 0
        for jid, by in due.items():
            end = res[jid].result.end
            late += end > by if end is not None else (now is None or now > by)
        if late > late_deadlines:
            return f"more than {late_deadlines} of {len(due)} deadline jobs not done by their deadlines"
        if now is None or now > deadline:
            left = [jid for jid in be if res[jid].result.end is None or res[jid].result.end > deadline]
            if left:
                return f"{len(left)} best-effort jobs not done within {s.span_factor:g}x the span"
        if now is None and any(st.result.end is None for st in res.values()):
            return "some jobs never finished (bigger than the cluster)"
        return ""

    at = engine.start
    while True:
        if until_s is not None:
            engine.run(until=engine.start + until_s)
            why = "stopped at --until-s"
            break
        if stop_early:
            at += CHECK_EVERY_S
            engine.run(until=at)
        else:
            engine.run()
        if engine.finished():
            why = missed(None)
            break
        if stop_early and (why := missed(at)):
            break
    return {jid: st.result for jid, st in engine.jobs.items()}, not why, why, engine.cycles


def silo_cluster(team: str, node_count: int, s: Settings) -> Snapshot:
    return cluster(node_count, [Queue(team, deserved_milli=node_count * s.gpus_per_node * 1000)], s)


def run_silos(trace: list[TraceJob], silo_nodes: dict[str, int], s: Settings, *, stop_early: bool = False) -> Outcome:
    wall, cpu = time.perf_counter(), time.process_time()
    results: dict[str, JobResult] = {}
    whys, cycles = [], 0
    window = span(trace)
    for team, jobs in teams_of(trace).items():
        res, ok, why, n = replay_until_known(silo_cluster(team, silo_nodes[team], s), replay_jobs(jobs, "silos", s),
                                             jobs, s, stop_early=stop_early, window=window)
        results.update(res)
        cycles += n
        if not ok:
            whys.append(why)
            if stop_early:
                break
    gpus = {t: n * s.gpus_per_node for t, n in silo_nodes.items()}
    return Outcome("silos", sum(gpus.values()), not whys, "; ".join(whys), results, gpus, cycles,
                   time.perf_counter() - wall, time.process_time() - cpu)


def run_pool(trace: list[TraceJob], mode: str, node_count: int, silo_gpus: dict[str, int], s: Settings, *,
             stop_early: bool = False, digest: DecisionsDigest | None = None,
             until_s: float | None = None) -> Outcome:
    wall, cpu = time.perf_counter(), time.process_time()
    total = node_count * s.gpus_per_node
    queues = pool_queues(total, silo_gpus, mode)
    res, ok, why, cycles = replay_until_known(cluster(node_count, queues, s), replay_jobs(trace, mode, s), trace, s,
                                              stop_early=stop_early, digest=digest, until_s=until_s)
    return Outcome(mode, total, ok, why, res, deserved_shares(total, silo_gpus), cycles,
                   time.perf_counter() - wall, time.process_time() - cpu)


# --------------------------------------------------------------------------- the search


def teams_of(trace: list[TraceJob]) -> dict[str, list[TraceJob]]:
    out: dict[str, list[TraceJob]] = defaultdict(list)
    for j in trace:
        out[j.team].append(j)
    return dict(sorted(out.items()))


def node_bounds(trace: list[TraceJob], s: Settings, length: float | None = None) -> tuple[int, int]:
    """(lowest, highest) node counts worth trying: no fewer than the biggest job needs or than would do all the
    work within the span allowed (`length`: the whole trace's span); no more than the peak demand with every
    job started at once, plus a node."""
    per = s.gpus_per_node
    biggest = max(math.ceil(j.gpus / per) if j.gpus > per else 1 for j in trace)
    if length is None:
        _, length = span(trace)
    work = sum(j.gpus * j.duration for j in trace)
    lo = max(biggest, math.ceil(work / max(s.span_factor * length, 1.0) / per))
    hi = max(lo, math.ceil(peak_demand(trace) / per) + 1)
    return lo, hi


def smallest(feasible: Callable[[int], bool], lo: int, hi: int, log: Callable[[str], None], *,
             near: int | None = None, hi_meets: bool = False) -> int:
    """The smallest n in [lo, ...) with feasible(n), assuming feasibility only grows with n; `hi` is a first
    guess of a feasible size, raised by half until it is. `near`: a close guess, so sizes are tried from it,
    down while they meet the target (near-1, near-2, near-4...) or else up (near+1, near+3, near+7...),
    doubling the step, before halving back: fewest probes near it. `hi_meets`: `hi` is known to meet the
    target (measured before), so it is not tried first."""
    if near is not None:
        near, step = max(lo, near), 1
        if feasible(near):
            hi = near
            while hi - step >= lo and feasible(hi - step):
                hi, step = hi - step, step * 2
            lo = max(lo, hi - step + 1)
        else:
            while near + step < hi:
                if feasible(near + step):
                    hi = near + step
                    break
                near, step = near + step, step * 2
            lo = near + 1
    while not hi_meets and not feasible(hi):
        lo, hi = hi + 1, math.ceil(hi * 1.5)
        log(f"  raising the upper bound to {hi} nodes")
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def find_silos(trace: list[TraceJob], s: Settings, log: Callable[[str], None]) -> dict[str, int]:
    """Each team's smallest cluster (nodes) that meets the target on its own."""
    out = {}
    window = span(trace)
    for team, jobs in teams_of(trace).items():
        lo, hi = node_bounds(jobs, s, window[1])
        tried: dict[int, bool] = {}

        def feasible(n: int, team=team, jobs=jobs, tried=tried) -> bool:
            if n not in tried:
                _, ok, _, _ = replay_until_known(silo_cluster(team, n, s), replay_jobs(jobs, "silos", s), jobs, s,
                                                 stop_early=True, window=window)
                tried[n] = ok
            return tried[n]

        out[team] = smallest(feasible, lo, hi, log)
        log(f"  silo {team}: {out[team]} nodes ({out[team] * s.gpus_per_node} GPUs), tried {sorted(tried)}")
    return out


def find_pool(trace: list[TraceJob], mode: str, silo_gpus: dict[str, int], s: Settings,
              log: Callable[[str], None], *, at_least: int | None = None,
              between: tuple[int, int] | None = None) -> tuple[int, Outcome]:
    """The smallest pool meeting the target, and its replay (a size that meets it was replayed to the end).
    `at_least`: the strict jobs' own smallest pool. `pool` needs at least that; for `pool-besteffort` it is
    only a close guess, searched from (best-effort work in queues that deserve nothing changes how the strict
    jobs' queues share the pool: it may meet the target where the strict jobs alone do not)."""
    lo, hi = node_bounds(trace, s)
    hi = min(hi, max(lo, sum(silo_gpus.values()) // s.gpus_per_node))
    near = at_least if mode == "pool-besteffort" else None
    if at_least is not None:
        hi = max(hi, at_least)
        if near is None:
            lo = max(lo, at_least)
    tried: dict[int, bool] = {}
    met: dict[int, Outcome] = {}

    def feasible(n: int) -> bool:
        if n not in tried:
            out = run_pool(trace, mode, n, silo_gpus, s, stop_early=True)
            tried[n] = out.feasible
            if out.feasible:
                met[n] = out
            log(f"  {mode} {n} nodes: {'meets the target' if out.feasible else out.why} "
                f"({out.cycles} cycles, {out.wall_s:.1f} s wall, {out.cpu_s:.1f} s CPU)")
        return tried[n]

    if between is not None:
        lo, hi = between
        found = smallest(feasible, lo, hi, log, hi_meets=True)
        if found not in met:
            met[found] = run_pool(trace, mode, found, silo_gpus, s)
        return found, met[found]
    found = smallest(feasible, lo, hi, log, near=near)
    return found, met[found]


# --------------------------------------------------------------------------- output


def silo_split(trace: list[TraceJob], total_gpus: int, s: Settings) -> dict[str, int]:
    """Nodes per team when `--gpus` is given in silos mode: in proportion to each team's GPU-hours, each at
    least its biggest job, by the largest remainder."""
    per = s.gpus_per_node
    teams = teams_of(trace)
    work = {t: sum(j.gpus * j.duration for j in jobs) for t, jobs in teams.items()}
    least = {t: max(math.ceil(j.gpus / per) for j in jobs) for t, jobs in teams.items()}
    nodes = total_gpus // per
    exact = {t: nodes * w / sum(work.values()) for t, w in work.items()}
    out = {t: max(least[t], math.floor(x)) for t, x in exact.items()}
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[: max(0, nodes - sum(out.values()))]:
        out[t] += 1
    return out


def report(outcome: Outcome, trace: list[TraceJob]) -> dict:
    teams, total = outcome.figures(trace)
    return {"mode": outcome.mode, "gpus": outcome.gpus, "meets_target": outcome.feasible, "why_not": outcome.why,
            "team_gpus": outcome.team_gpus, "cycles": outcome.cycles, "wall_s": round(outcome.wall_s, 2),
            "cpu_s": round(outcome.cpu_s, 2), "total": total.as_dict(),
            "teams": {t: f.as_dict() for t, f in teams.items()}}


def _fmt(value, digits=0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def print_table(result: dict, out) -> None:
    print(f"\n{result['mode']}: {result['gpus']} GPUs"
          + (f", min_gpus {result['min_gpus']}" if "min_gpus" in result else "")
          + f" · {'meets' if result['meets_target'] else 'misses'} the target"
          + (f" ({result['why_not']})" if result["why_not"] else "")
          + f" · {result['cycles']} cycles, {result['wall_s']} s wall, {result['cpu_s']} s CPU", file=out)
    head = ("team", "GPUs", "jobs", "wait p50", "wait p95", "JCT p50", "JCT p95", "util", "GPU-h", "makespan",
            "preempt", "lost GPU-h", "on time", "BE JCT p95", "BE done")
    print("  ".join(f"{h:>10}" for h in head), file=out)
    rows = [(t, f) for t, f in result["teams"].items()] + [("TOTAL", result["total"])]
    for name, f in rows:
        cells = (name[:10], _fmt(f["capacity_gpus"]), _fmt(f["jobs"]), _fmt(f["wait_p50_s"]), _fmt(f["wait_p95_s"]),
                 _fmt(f["jct_p50_s"]), _fmt(f["jct_p95_s"]), _fmt(f["utilisation"], 3), _fmt(f["gpu_hours"], 1),
                 _fmt(f["makespan_s"]), _fmt(f["preemptions"]), _fmt(f["lost_gpu_hours"], 1),
                 _fmt(f["deadline_met_share"], 3), _fmt(f["best_effort_jct_p95_s"]), _fmt(f["best_effort_done_s"]))
        print("  ".join(f"{c:>10}" for c in cells), file=out)


def parse_gpus_between(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(part) for part in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO-HI in GPUs, got {text!r}") from None
    if not 0 < lo < hi:
        raise argparse.ArgumentTypeError(f"expected 0 < LO < HI, got {text!r}")
    return lo, hi


def parse_silo_gpus(text: str) -> dict[str, int]:
    out = {}
    for part in text.split(","):
        team, _, gpus = part.partition("=")
        if not team.strip() or not gpus.strip().isdigit() or int(gpus) <= 0:
            raise argparse.ArgumentTypeError(f"--silo-gpus wants team=GPUs,..., got {part!r}")
        out[team.strip()] = int(gpus)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", required=True, help="a Philly-format CSV (or, with --trace-format alibaba, "
                                                       "an openb_pod_list_*.csv)")
    parser.add_argument("--trace-format", choices=("philly", "alibaba"), default="philly")
    parser.add_argument("--mode", default="all", help="silos, pool, pool-besteffort, or all (the three)")
    parser.add_argument("--gpus", type=int, help="cluster GPUs (whole nodes); silos: split over teams by GPU-hours")
    parser.add_argument("--find-min-gpus", action="store_true", help="search the fewest GPUs meeting the target")
    parser.add_argument("--gpus-between", type=parse_gpus_between, metavar="LO-HI",
                        help="with --find-min-gpus: try the pools only from LO to HI GPUs, HI known to meet the "
                             "target (an earlier search's bounds; not replayed again unless it is the answer)")
    parser.add_argument("--p95-wait", type=float, default=60.0, help="target p95 wait of strict jobs, seconds")
    parser.add_argument("--span-factor", type=float, default=1.5, help="best-effort jobs done within this x span")
    parser.add_argument("--soften", type=float, metavar="FRACTION",
                        help="first turn this share of the strict jobs into deadline jobs (as bench.traces --soften)")
    parser.add_argument("--seed", type=int, default=1, help="with --soften: which jobs, which deadlines")
    parser.add_argument("--deadline-share", type=float, default=99.0,
                        help="target: at least this %% of deadline jobs done by their deadlines")
    parser.add_argument("--deadline-margin", type=float, default=0.1,
                        help="a deadline job's latest start keeps this share of its run time before the deadline")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--cycle-s", type=float, default=10.0, help="simulated seconds between cycles")
    parser.add_argument("--ticks-only", action="store_true",
                        help="cycles only every --cycle-s, as the platform's beat runs them (not also on arrivals "
                             "and ends): fewer cycles, longer waits")
    parser.add_argument("--checkpoint-min", type=float, default=30.0,
                        help="minutes of work between checkpoints (a preempted job loses what came after)")
    parser.add_argument("--silo-gpus", type=parse_silo_gpus,
                        help="team=GPUs,... the silos the pools' shares follow (default: searched)")
    parser.add_argument("--nodes-file", help="alibaba: the node list (default: beside the pod list)")
    parser.add_argument("--eta-accuracy", action="store_true",
                        help="pools: also ask the expected-start forecast while jobs wait and score it (bench/eta.py)")
    parser.add_argument("--eta-asked-until", type=float, metavar="S",
                        help="with --eta-accuracy: ask only for jobs submitted in the trace's first S seconds")
    parser.add_argument("--eta-declared-noise", type=float, default=0.0, metavar="SIGMA",
                        help="with --eta-accuracy: declared run times are the real ones times a log-normal draw")
    parser.add_argument("--decisions-hash", action="store_true",
                        help="one size, pools: also give a digest of every cycle's evictions and binds, to check that "
                             "a change decides exactly as before")
    parser.add_argument("--until-s", type=float, metavar="S",
                        help="one size, pools: replay only the trace's first S simulated seconds (to profile)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    if args.trace_format == "alibaba":
        from bench.replay_pods import main as pods_main

        return pods_main(args)
    modes = MODES if args.mode == "all" else tuple(m.strip() for m in args.mode.split(","))
    if any(m not in MODES for m in modes):
        parser.error(f"--mode must be one of {', '.join(MODES)} or all")
    if not args.find_min_gpus and not args.gpus:
        parser.error("give --gpus N or --find-min-gpus")
    if args.find_min_gpus and (args.decisions_hash or args.until_s is not None):
        parser.error("--decisions-hash and --until-s go with one size (--gpus), not --find-min-gpus")
    if args.gpus is not None and (args.gpus <= 0 or args.gpus % args.gpus_per_node):
        parser.error("--gpus must be a positive multiple of --gpus-per-node (whole nodes)")
    if args.gpus_between is not None and (not args.find_min_gpus
                                          or any(g % args.gpus_per_node for g in args.gpus_between)):
        parser.error("--gpus-between goes with --find-min-gpus, in multiples of --gpus-per-node (whole nodes)")
    s = Settings(args.gpus_per_node, args.cycle_s, args.checkpoint_min * 60, args.p95_wait, args.span_factor,
                 not args.ticks_only, args.deadline_share / 100, args.deadline_margin)
    log_to = sys.stderr if args.json else sys.stdout

    def log(message: str) -> None:
        print(message, file=log_to, flush=True)

    started_wall, started_cpu = time.perf_counter(), time.process_time()
    if args.soften is not None:
        from bench.traces import softened

        everything = read_philly(softened(args.trace, args.soften, args.seed))
    else:
        everything = read_philly_file(args.trace)
    trace = gpu_jobs(everything)
    origin, length = span(trace)
    log(f"{args.trace}: {len(everything)} jobs, {len(everything) - len(trace)} CPU-only left out, "
        f"{len({j.team for j in trace})} teams, span {length:,.0f} s, peak demand {peak_demand(trace):,} GPUs")
    summary: dict = {"trace": args.trace, "jobs": len(trace), "cpu_only_left_out": len(everything) - len(trace),
                     "span_s": length, "settings": {"gpus_per_node": s.gpus_per_node, "cycle_s": s.cycle_s,
                                                    "checkpoint_s": s.checkpoint_s, "p95_wait_s": s.wait_target_s,
                                                    "span_factor": s.span_factor,
                                                    "deadline_share": s.deadline_share,
                                                    "deadline_margin": s.deadline_margin,
                                                    "soften": args.soften, "seed": args.seed}, "modes": {}}
    silo_gpus: dict[str, int] | None = args.silo_gpus
    if "silos" in modes or silo_gpus is None:
        if args.find_min_gpus or silo_gpus is None:
            log("silos: searching each team's smallest cluster")
            silo_nodes = find_silos(trace, s, log)
        else:
            silo_nodes = silo_split(trace, args.gpus, s)
        silo_gpus = {t: n * s.gpus_per_node for t, n in silo_nodes.items()}
        if "silos" in modes:
            chosen = silo_nodes if (args.find_min_gpus or not args.gpus) else silo_split(trace, args.gpus, s)
            result = report(run_silos(trace, chosen, s), trace)
            if args.find_min_gpus:
                result["min_gpus"] = result["gpus"]
            summary["modes"]["silos"] = result
            print_table(result, log_to)
    summary["silo_gpus"] = silo_gpus
    strict_nodes = None
    between = None
    if args.gpus_between is not None:
        between = tuple(g // s.gpus_per_node for g in args.gpus_between)
    if args.find_min_gpus and between is None and any(m != "silos" for m in modes):
        # the strict jobs alone need a pool this big: `pool` needs at least as much, and `pool-besteffort`
        # is searched from it
        log("pool, strict jobs only: searching the smallest pool (a lower bound for `pool`, a first guess for "
            "`pool-besteffort`)")
        strict_nodes, _ = find_pool([j for j in trace if not j.best_effort], "pool", silo_gpus, s, log)
        summary["strict_only_min_gpus"] = strict_nodes * s.gpus_per_node
        log(f"  strict jobs only: {strict_nodes * s.gpus_per_node} GPUs")
    for mode in (m for m in modes if m != "silos"):
        digest = None
        if args.find_min_gpus:
            log(f"{mode}: searching the smallest pool")
            _, outcome = find_pool(trace, mode, silo_gpus, s, log, at_least=strict_nodes, between=between)
        else:
            digest = DecisionsDigest() if args.decisions_hash else None
            outcome = run_pool(trace, mode, args.gpus // s.gpus_per_node, silo_gpus, s, digest=digest,
                               until_s=args.until_s)
        result = report(outcome, trace)
        if digest is not None:
            result["decisions_sha256"] = digest.hexdigest()
            log(f"  decisions digest over {digest.cycles} cycles: {result['decisions_sha256']}")
        if args.find_min_gpus:
            result["min_gpus"] = result["gpus"]
        if args.eta_accuracy:
            from bench.eta import eta_for_pool

            log(f"{mode}: asking the expected-start forecast")
            result["eta"] = eta_for_pool(trace, mode, outcome.gpus // s.gpus_per_node, silo_gpus, s, outcome.results,
                                         declared_noise=args.eta_declared_noise, seed=args.seed,
                                         asked_until_s=args.eta_asked_until, log=log)
            summary["eta"] = result["eta"]
            log(f"  eta: coverage {result['eta']['coverage']}, median width / wait "
                f"{result['eta']['median_width_to_wait']}, p90 {result['eta']['p90_width_to_wait']}, "
                f"median error {result['eta']['median_abs_error_s']} s over {result['eta']['answers']} answers")
            hindsight = {b: (h or {}).get("median_width_to_wait") for b, h in result["eta"]["hindsight"].items()}
            log(f"  eta: narrowest median width / wait at 90 % by constant factors chosen with hindsight: "
                f"on the early replay {hindsight['earliest']}, on the late {hindsight['latest']} (None: none reach it)")
        summary["modes"][mode] = result
        print_table(result, log_to)
    if "silos" in summary["modes"]:
        base = summary["modes"]["silos"]["gpus"]
        summary["ratio_to_silos"] = {m: round(r["gpus"] / base, 3) for m, r in summary["modes"].items()}
        if "strict_only_min_gpus" in summary:
            summary["ratio_to_silos"]["pool-strict-only"] = round(summary["strict_only_min_gpus"] / base, 3)
        log("\nGPUs against silos: " + ", ".join(f"{m} {r}" for m, r in summary["ratio_to_silos"].items()))
    summary["wall_s"] = round(time.perf_counter() - started_wall, 1)
    summary["cpu_s"] = round(time.process_time() - started_cpu, 1)
    log(f"took {summary['wall_s']} s wall, {summary['cpu_s']} s CPU")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
