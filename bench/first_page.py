"""Time from `git clone` to an HTTP 200 on /login/ under `make run`, with an empty or a warm package cache.

    python -m bench.first_page --runs 3            # both caches, median of 3 each
    python -m bench.first_page --runs 1 --cache warm --json

Each run clones this repository's HEAD into a temporary folder (with ../shared beside it, as CI has it),
starts `make run` there on a free port and polls /login/ until it answers 200, then stops the whole
process group. "empty" gives uv and pip fresh, empty cache folders; "warm" uses a cache shared by the runs
(filled by a first, unreported run when it is empty). Wall seconds, and the CPU seconds of everything
`make run` started.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 900


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def login_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(cache_dir: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="first-page-") as tmp:
        root = Path(tmp)
        shared = REPO.parent / "shared"
        if shared.exists():
            (root / "shared").symlink_to(shared.resolve())
        port = free_port()
        env = {**os.environ, "PORT": str(port), "UV_CACHE_DIR": str(cache_dir / "uv"),
               "PIP_CACHE_DIR": str(cache_dir / "pip"),
               "SIM_TRAINING_PROCESSES": "0"}  # the first page's cost, not the demo's training processes
        env.pop("VIRTUAL_ENV", None)
        cpu_before = children_cpu()
        start = time.monotonic()
        subprocess.run(["git", "clone", "-q", str(REPO), str(root / "p")], check=True)
        log = open(root / "make-run.log", "w")
        proc = subprocess.Popen(["make", "run"], cwd=root / "p", env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        url = f"http://127.0.0.1:{port}/login/"
        try:
            while not login_answers(url):
                if proc.poll() is not None or time.monotonic() - start > TIMEOUT_S:
                    log.flush()
                    sys.stderr.write((root / "make-run.log").read_text()[-4000:])
                    raise SystemExit(f"make run ended or timed out before {url} answered")
                time.sleep(0.5)
            wall = time.monotonic() - start
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
        return {"wall_s": round(wall, 1), "cpu_s": round(children_cpu() - cpu_before, 1)}


def measure(cache: str, runs: int) -> dict:
    results = []
    if cache == "warm":
        cache_dir = Path(tempfile.mkdtemp(prefix="first-page-cache-"))
        one_run(cache_dir)  # fills the cache; not reported
        for _ in range(runs):
            results.append(one_run(cache_dir))
        shutil.rmtree(cache_dir, ignore_errors=True)
    else:
        for _ in range(runs):
            cache_dir = Path(tempfile.mkdtemp(prefix="first-page-cache-"))
            try:
                results.append(one_run(cache_dir))
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
    return {"cache": cache, "runs": results,
            "median_wall_s": statistics.median(r["wall_s"] for r in results),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in results)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", choices=["empty", "warm", "both"], default="both")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    caches = ["empty", "warm"] if args.cache == "both" else [args.cache]
    report = [measure(cache, args.runs) for cache in caches]
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in report:
        runs = ", ".join(f"{r['wall_s']} s" for r in row["runs"])
        print(f"{row['cache']:>5} cache: median {row['median_wall_s']} s wall, {row['median_cpu_s']} s CPU ({runs})")


if __name__ == "__main__":
    main()
