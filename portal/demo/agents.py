"""Tokens for the simulated node agents of `make run`: a fresh one per node of the demo pools."""

from __future__ import annotations

import json
import os

from billing.api import create_node_token
from billing.models import NodeToken
from portal.demo.cluster import DEMO_POOLS
from scheduling.api import clock
from scheduling.models import Node


def write_agent_tokens(output: str) -> int:
    """Revoke the demo nodes' old tokens and write new ones to `output` (JSON for nodeagent.fleet,
    mode 600). Returns how many nodes got one."""
    nodes = Node.objects.filter(pool__name__in=DEMO_POOLS).select_related("pool").prefetch_related("gpus")
    NodeToken.objects.filter(node__in=nodes, revoked__isnull=True).update(revoked=clock.now())
    fleet = {}
    for node in nodes:
        _, raw = create_node_token(node)
        fleet[node.name] = {"token": raw, "gpus": node.gpus.count(), "model": node.pool.gpu_model,
                            "memory_mib": node.pool.gpu_memory_mib}
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(fleet, out)
    return len(fleet)
