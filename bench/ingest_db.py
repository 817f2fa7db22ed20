"""Django side of the ingestion benchmark, run in a child process on the benchmark's DATABASE_URL.

    DATABASE_URL=... python -m bench.ingest_db setup --nodes 100 --gpus 8   -> {"node-0000": "gpn_...", ...}
    DATABASE_URL=... python -m bench.ingest_db count                        -> {"total": N, "per_node": {...}}

`setup` migrates the (fresh) database, then creates one pool, the nodes with their GPUs and one
agent token per node through the app's own `create_node_token`. Only JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{node}-{index}"


def setup(nodes: int, gpus: int) -> dict[str, str]:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)

    from billing.metering.tokens import create_node_token
    from scheduling.models import Gpu, Node, NodePool

    pool = NodePool.objects.create(name="bench-h100", gpu_model="H100-80GB", gpu_memory_mib=81920)
    Node.objects.bulk_create([Node(pool=pool, name=f"node-{i:04d}") for i in range(nodes)])
    made = list(Node.objects.filter(pool=pool).order_by("name"))
    Gpu.objects.bulk_create([Gpu(node=node, index=g, uuid=gpu_uuid(node.name, g), memory_mib=81920)
                             for node in made for g in range(gpus)])
    return {node.name: create_node_token(node)[1] for node in made}


def count() -> dict:
    from django.db.models import Count

    from billing.models import UsageSample

    per_node = dict(UsageSample.objects.values_list("node__name").annotate(n=Count("id")).order_by())
    return {"total": UsageSample.objects.count(), "per_node": per_node}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    setup_cmd = sub.add_parser("setup")
    setup_cmd.add_argument("--nodes", type=int, required=True)
    setup_cmd.add_argument("--gpus", type=int, default=8)
    sub.add_parser("count")
    args = parser.parse_args(argv)
    if "DATABASE_URL" not in os.environ:
        parser.error("DATABASE_URL must name the benchmark's own database")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    result = setup(args.nodes, args.gpus) if args.command == "setup" else count()
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
