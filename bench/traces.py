"""Loading the Alibaba GPU-2023 trace (cluster-trace-gpu-v2023) and building the paper's workload; and
softening a Philly trace (`python -m bench.traces --soften FRACTION --seed N TRACE [--out FILE]`): that share
of its strict jobs made deadline jobs (`job_type: soft`), deadlines drawn like its soft jobs'
(`scheduling.traces.soften`).

Node file: ``sn,cpu_milli,memory_mib,gpu,model``.  Pod file: ``name,cpu_milli,memory_mib,num_gpu``
and optionally ``gpu_milli`` (absent: whole GPUs), ``gpu_spec`` (allowed models separated by
``|``), ``qos`` and time columns, which are ignored here.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduling.core.fragmentation import ShapeTable
from scheduling.core.placement import NodeCapacity, PlacementRequest
from scheduling.core.units import MILLI_PER_GPU
from scheduling.traces import soften

INFLATION = 1.3  # the paper inflates arrivals to 130 % of GPU capacity
COVERAGE = 0.95  # typical shapes cover 95 % of pods


@dataclass(frozen=True)
class TracePod:
    name: str
    request: PlacementRequest
    models: tuple[str, ...]  # allowed GPU models, sorted; empty = any
    qos: str

    @property
    def gpu_milli_total(self) -> int:
        return self.request.total_gpu_milli


def _read(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        return list(reader)


def _int(row: dict[str, str], column: str, path: Path, default: int | None = None) -> int:
    text = (row.get(column) or "").strip()
    if not text:
        if default is None:
            raise ValueError(f"{path}: row {row.get('name') or row.get('sn')}: empty {column}")
        return default
    try:
        return int(float(text))
    except ValueError:
        raise ValueError(f"{path}: row {row.get('name') or row.get('sn')}: {column} is not a number: {text!r}") from None


def load_nodes(path: str | Path) -> list[NodeCapacity]:
    path = Path(path)
    rows = _read(path, ("sn", "cpu_milli", "memory_mib", "gpu"))
    nodes = []
    for row in rows:
        num_gpus = _int(row, "gpu", path)
        nodes.append(
            NodeCapacity.empty(
                row["sn"], (row.get("model") or "").strip(), num_gpus,
                _int(row, "cpu_milli", path), _int(row, "memory_mib", path),
            )
        )
    return nodes


def load_pods(path: str | Path) -> list[TracePod]:
    """Pods sorted by name, GPU asks normalised as the paper does."""
    path = Path(path)
    rows = _read(path, ("name", "cpu_milli", "memory_mib", "num_gpu"))
    pods = []
    for row in rows:
        num_gpu = _int(row, "num_gpu", path)
        # > 1000 counts as 1000; no gpu_milli column means whole GPUs; CPU-only pods ask 0
        gpu_milli = min(_int(row, "gpu_milli", path, default=MILLI_PER_GPU), MILLI_PER_GPU) if num_gpu > 0 else 0
        if num_gpu > 0 and gpu_milli <= 0:
            raise ValueError(f"{path}: pod {row['name']}: num_gpu {num_gpu} with gpu_milli {gpu_milli}")
        if num_gpu > 1 and gpu_milli < MILLI_PER_GPU:
            raise ValueError(f"{path}: pod {row['name']}: a fraction of {num_gpu} GPUs is not supported")
        spec = (row.get("gpu_spec") or "").strip()
        models = tuple(sorted({m.strip() for m in spec.split("|") if m.strip()}))
        request = PlacementRequest(
            gpu_milli=gpu_milli, num_gpus=num_gpu, gpu_mem_mib=0,
            cpu_milli=_int(row, "cpu_milli", path), mem_mib=_int(row, "memory_mib", path),
        )
        pods.append(TracePod(row["name"], request, models, (row.get("qos") or "").strip()))
    pods.sort(key=lambda p: p.name)
    return pods


def gpu_capacity(nodes: list[NodeCapacity]) -> int:
    return MILLI_PER_GPU * sum(n.num_gpus for n in nodes)


@dataclass(frozen=True)
class Workload:
    pods: list[TracePod]  # arrival order
    node_order: np.ndarray  # tie-break order of the nodes
    tail: int  # how many pods the inflation appended


def build_workload(pods: list[TracePod], num_nodes: int, capacity: int, seed: int) -> Workload:
    """Shuffle the name-sorted pods with the seed, append pods drawn uniformly with replacement
    until the requested GPU would pass 1.3 x capacity, and permute the node order."""
    if not pods:
        raise ValueError("the pod list is empty")
    rng = np.random.default_rng(seed)
    order = [pods[i] for i in rng.permutation(len(pods))]
    total = sum(p.gpu_milli_total for p in order)
    limit = INFLATION * capacity
    tail = 0
    if any(p.gpu_milli_total for p in pods):
        while True:
            pod = pods[int(rng.integers(len(pods)))]
            if total + pod.gpu_milli_total > limit:
                break
            order.append(pod)
            total += pod.gpu_milli_total
            tail += 1
    return Workload(order, rng.permutation(num_nodes), tail)


def typical_shapes(pods: list[TracePod], coverage: float = COVERAGE) -> ShapeTable:
    """FGD's typical shapes of a pod list (CPU-only pods included)."""
    return ShapeTable.from_counts(Counter(p.request.shape(p.models) for p in pods), coverage)


def softened(path: str | Path, fraction: float, seed: int) -> list[str]:
    """The lines of the Philly trace at `path` with `fraction` of its strict jobs made deadline jobs."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        columns = list(reader.fieldnames or ())
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(soften(rows, fraction, seed))
    return out.getvalue().splitlines(keepends=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.traces",
                                     description="Soften a Philly trace: a share of its strict jobs get deadlines.")
    parser.add_argument("trace", help="a Philly-format CSV with job_type and expect_time_list columns")
    parser.add_argument("--soften", type=float, required=True, metavar="FRACTION",
                        help="share of the strict jobs to make deadline jobs (0..1)")
    parser.add_argument("--seed", type=int, default=1, help="which jobs, and which deadlines")
    parser.add_argument("--out", help="where to write the trace (default: standard output)")
    args = parser.parse_args(argv)
    lines = softened(args.trace, args.soften, args.seed)
    if args.out:
        with open(args.out, "w", encoding="utf-8", newline="") as f:
            f.writelines(lines)
    else:
        sys.stdout.writelines(lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
