"""The capacity planner's uploaded-trace replay, end to end, as the Celery task runs it.

    python -m bench.planner_upload --trace ../shared/traces/philly/trace_job_Philly_MIX1.csv [--profile FILE]

A throwaway SQLite database (in a temporary VAR_DIR) is migrated and given the demo cluster and queues
(portal/demo, no history); the trace's text is checked as the upload form checks it
(`planner_services.check_trace`), recorded as a `PlannerRun` of kind trace with the form's starting values
(the actual cluster, its queues, 30-minute checkpoints, preemption on, the unknown teams in vision-lab), and
`planner_services.execute_run` runs it: parsing, both replays (the actual cluster and the "edited" one, here
the same) and their figures. Progress checkpoints (the run's `progress` as the page polls it) are printed
with the seconds since the start; at the end wall and CPU seconds (this process), the simulated cycles and
the jobs. `--profile FILE` writes a cProfile of `execute_run`. `--json`: the figures as one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "philly" / "trace_job_Philly_MIX1.csv"


def setup(var_dir: Path) -> None:
    os.environ["VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from portal import demo

    demo.load_all(history=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE))
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the replay here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    text = Path(args.trace).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="bench-planner-") as tmp:
        setup(Path(tmp))
        from portal.console import planner_services as services
        from portal.console.models import PlannerRun
        from scheduling.api import cluster_snapshot

        inputs = services.actual_inputs(cluster_snapshot())
        inputs.update(checkpoint_min=30, trace_queue="vision-lab", preemption=True)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        jobs = services.check_trace(text)   # the upload form's check
        run = PlannerRun.objects.create(kind=PlannerRun.Kind.TRACE, inputs=inputs, trace_csv=text)
        checkpoints: list[tuple[float, float]] = []
        done = threading.Event()

        def watch() -> None:
            from django.db import connection

            last = None
            while not done.wait(1.0):
                progress = PlannerRun.objects.filter(pk=run.pk).values_list("progress", flat=True).first()
                if progress != last:
                    checkpoints.append((round(time.perf_counter() - wall0, 1), progress))
                    print(f"  {checkpoints[-1][0]:7.1f} s  progress {progress:.3f}", file=sys.stderr, flush=True)
                    last = progress
            connection.close()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        try:
            services.execute_run(run.pk)
        finally:
            if profiler:
                profiler.disable()
                profiler.dump_stats(args.profile)
            done.set()
            watcher.join()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        run.refresh_from_db()
        results = run.results
        figures = {"trace_jobs": jobs, "replayed_jobs": results["jobs"], "state": run.state,
                   "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                   "cycles": {side: results[side]["total"]["cycles"] for side in ("actual", "edited")},
                   "stopped_after_cycles": {side: results[side]["stopped_after_cycles"]
                                            for side in ("actual", "edited")},
                   "progress_checkpoints": checkpoints}
        print(f"{jobs} trace jobs ({results['jobs']} replayed): {run.state} in {wall:.1f} s wall, {cpu:.1f} s CPU; "
              f"cycles {figures['cycles']}")
        if args.json:
            print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
