"""A bench replay decides the same as it did before it was made faster: a small fixture trace (strict,
deadline and best-effort jobs, gangs, reclaims and preemptions) replayed in `pool-besteffort` gives, job by job,
the starts, ends, evictions and lost work recorded when the replay took 261.6 s CPU for MIX1 softened at 0.6
on 1,064 GPUs. A change meant only to make the replay faster must leave this digest as it is."""

import hashlib
import random

from bench import replay as bench
from scheduling.traces import TraceJob

RECORDED = "67ffe7c8d592632014835ce0ad734aeb9b1d04cca27ccb37d93ec9723c962983"


def fixture_trace() -> list[TraceJob]:
    rng = random.Random(7)
    out = []
    for i in range(240):
        gpus = rng.choice([1, 1, 1, 2, 4, 8, 16])
        duration = float(rng.randrange(60, 1800))
        kind = rng.random()
        best = kind < 0.35
        deadline = None if best or kind < 0.6 else duration * rng.choice([1.2, 2.0, 4.0])
        out.append(TraceJob(str(i), f"t{i % 3}", gpus, float(rng.randrange(0, 3600)), duration, best, deadline))
    return sorted(out, key=lambda j: (j.submit, j.id))


def test_a_fixture_replay_gives_the_results_recorded_before_the_speed_up():
    outcome = bench.run_pool(fixture_trace(), "pool-besteffort", 4, {"t0": 16, "t1": 24, "t2": 8},
                             bench.Settings(cycle_s=10.0, checkpoint_s=300.0))
    results = sorted((r.id, r.start, r.end, r.evictions, round(r.lost_s, 6)) for r in outcome.results.values())
    assert outcome.cycles == 681 and sum(r[3] for r in results) == 123      # reclaims and preemptions happened
    assert hashlib.sha256(repr(results).encode()).hexdigest() == RECORDED
