"""Model-constrained variants of a pod list: a share of the GPU pods may run only on some GPU models.

    python -m bench.constrained --nodes NODES.csv --pods PODS.csv --out DIR \
        [--shares 5,10,20,25,33] [--seeds 1-3] [--set-share 0.3]

writes ``DIR/<pods stem>_spec<share>_s<seed>.csv`` (the pod file with its ``gpu_spec`` column
filled in for the chosen pods; every other column kept) and prints one JSON object listing them.
Replay them with ``python -m bench.placement --pods DIR/...``.  Method (bench/PLACEMENT.md):

- ``share`` % of the pods that ask for GPUs (CPU-only pods have no model to ask for), rounded
  to the nearest pod, are chosen uniformly without replacement; pods that already carry a
  ``gpu_spec`` keep it and are not chosen.
- Each chosen pod gets one model, or with probability ``set_share`` a set of two (written
  ``A|B``), drawn without replacement with probability proportional to the models' GPUs in the
  node list, among the models that have a node able to hold the pod when empty (enough GPUs,
  CPU and memory), so no constraint makes a pod impossible by itself.
- Everything is drawn from ``numpy.random.default_rng(seed)``: the same inputs and seed give the
  same file.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.placement import parse_seeds
from bench.traces import load_nodes

SHARES = (5, 10, 20, 25, 33)  # % of GPU pods, the variants of bench/PLACEMENT.md
SET_SHARE = 0.3  # of the constrained pods, those allowed two models instead of one


@dataclass(frozen=True)
class ModelHost:
    """The node kinds of one GPU model and its GPUs in the node list."""

    gpus: int  # total GPUs of the model (the draw weight)
    hosts: tuple[tuple[int, int, int], ...]  # (gpus, cpu_milli, memory_mib) of each distinct node kind

    def can_hold(self, num_gpus: int, cpu_milli: int, mem_mib: int) -> bool:
        return any(g >= num_gpus and c >= cpu_milli and m >= mem_mib for g, c, m in self.hosts)


def model_hosts(nodes_path: str | Path) -> dict[str, ModelHost]:
    """GPU models of a node file (nodes without GPUs left out), sorted by name."""
    gpus: dict[str, int] = defaultdict(int)
    kinds: dict[str, set[tuple[int, int, int]]] = defaultdict(set)
    for node in load_nodes(nodes_path):
        if node.num_gpus > 0 and node.gpu_model:
            gpus[node.gpu_model] += node.num_gpus
            kinds[node.gpu_model].add((node.num_gpus, node.cpu_milli, node.mem_mib))
    return {m: ModelHost(gpus[m], tuple(sorted(kinds[m]))) for m in sorted(gpus)}


def _number(row: dict[str, str], column: str) -> int:
    text = (row.get(column) or "").strip()
    return int(float(text)) if text else 0


def constrain_rows(
    rows: list[dict[str, str]], models: dict[str, ModelHost], share: float, seed: int, set_share: float = SET_SHARE
) -> list[dict[str, str]]:
    """Copies of `rows` with ``gpu_spec`` set on `share` (0..1) of the GPU pods, see the module doc."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in 0..1, got {share}")
    if not 0 <= set_share <= 1:
        raise ValueError(f"set_share must be in 0..1, got {set_share}")
    if not models:
        raise ValueError("the node list has no GPU models")
    out = [dict(row) for row in rows]
    gpu_pods = [i for i, row in enumerate(out) if _number(row, "num_gpu") > 0]
    free = [i for i in gpu_pods if not (out[i].get("gpu_spec") or "").strip()]
    want = int(np.floor(share * len(gpu_pods) + 0.5))
    if want > len(free):
        raise ValueError(f"{want} pods to constrain but only {len(free)} GPU pods carry no gpu_spec yet")
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(np.array(free, dtype=np.int64), size=want, replace=False))
    names = list(models)
    weights = np.array([models[m].gpus for m in names], dtype=np.float64)
    for i in chosen:
        row = out[int(i)]
        ask = (_number(row, "num_gpu"), _number(row, "cpu_milli"), _number(row, "memory_mib"))
        able = np.array([models[m].can_hold(*ask) for m in names])
        # a pod no model can hold stays unconstrained (it fails anyway); rng draws stay in step
        pair = rng.random() < set_share
        if not able.any():
            continue
        p = np.where(able, weights, 0.0)
        size = 2 if pair and able.sum() >= 2 else 1
        picked = rng.choice(len(names), size=size, replace=False, p=p / p.sum())
        row["gpu_spec"] = "|".join(sorted(names[k] for k in picked))
    return out


def write_variant(
    nodes_path: str | Path, pods_path: str | Path, out_dir: str | Path, share_pct: int, seed: int,
    set_share: float = SET_SHARE,
) -> Path:
    """One variant file; returns its path."""
    pods_path = Path(pods_path)
    with open(pods_path, newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    if "gpu_spec" not in fields:
        fields.append("gpu_spec")
    rows = constrain_rows(rows, model_hosts(nodes_path), share_pct / 100.0, seed, set_share)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{pods_path.stem}_spec{share_pct:02d}_s{seed}.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def _shares(text: str) -> list[int]:
    try:
        shares = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shares must look like 5,10,20; got {text!r}") from None
    if not shares or any(not 0 <= s <= 100 for s in shares):
        raise argparse.ArgumentTypeError(f"shares are percentages in 0..100; got {text!r}")
    return shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", required=True, help="openb_node_list_*.csv (the models and their GPUs)")
    parser.add_argument("--pods", required=True, help="openb_pod_list_*.csv to constrain")
    parser.add_argument("--out", required=True, help="directory for the variant files")
    parser.add_argument("--shares", type=_shares, default=list(SHARES), help="%% of GPU pods, e.g. 5,10,20,25,33")
    parser.add_argument("--seeds", type=parse_seeds, default=[1], help="generator seeds, e.g. 1-3")
    parser.add_argument("--set-share", type=float, default=SET_SHARE,
                        help="of the constrained pods, the share allowed two models (default %(default)s)")
    args = parser.parse_args(argv)
    files = [
        str(write_variant(args.nodes, args.pods, args.out, share, seed, args.set_share))
        for share in args.shares for seed in args.seeds
    ]
    print(json.dumps({"pods_file": args.pods, "nodes_file": args.nodes, "shares": args.shares,
                      "seeds": args.seeds, "set_share": args.set_share, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
