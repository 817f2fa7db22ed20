"""Can a spec run on this cluster at all? Pure checks against a description of the node pools."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from scheduling.spec.model import JobSpec, RoleSpec
from scheduling.spec.units import format_memory

DEFAULT_POOL_SHARING = frozenset({"exclusive", "fraction"})


@dataclass(frozen=True)
class PoolInfo:
    name: str
    vendor: str  # "nvidia" | "amd"
    gpu_model: str  # e.g. "H100-80GB"
    gpu_memory_mib: int
    gpus_per_node: int
    sharing_modes: frozenset[str] = DEFAULT_POOL_SHARING
    mig_profiles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ClusterInfo:
    pools: tuple[PoolInfo, ...]


@dataclass(frozen=True)
class ClusterProblem:
    """A reason a spec cannot run; `role` is None for job-level fields, `attr` names the RoleSpec
    or JobSpec attribute it is about (used to point at the right place in the document)."""

    role: int | None
    attr: str
    message: str


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    options = list(choices)
    folded = {c.casefold(): c for c in options}
    if word.casefold() in folded:
        return f"; did you mean '{folded[word.casefold()]}'?"
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _names(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items))) or "none"


def _vendors(vendor: str) -> set[str]:
    return {"nvidia", "amd"} if vendor == "any" else {vendor}


def check_queue(queue: str | None, workspace_queues: Collection[str] | None) -> list[ClusterProblem]:
    if queue is None or workspace_queues is None or queue in workspace_queues:
        return []
    hint = did_you_mean(queue, workspace_queues)
    return [
        ClusterProblem(
            None,
            "queue",
            f"queue '{queue}' is not open to this workspace{hint} (open: {_names(workspace_queues)})",
        )
    ]


def check_role(index: int, role: RoleSpec, cluster: ClusterInfo) -> list[ClusterProblem]:
    """The first constraint of the role that no pool can meet, if any."""

    def problem(attr: str, message: str) -> list[ClusterProblem]:
        return [ClusterProblem(index, attr, f"role '{role.name}': {message}")]

    all_pools = cluster.pools
    pools = list(all_pools)
    if role.node_pool is not None:
        pools = [p for p in all_pools if p.name == role.node_pool]
        if not pools:
            hint = did_you_mean(role.node_pool, (p.name for p in all_pools))
            return problem(
                "node_pool",
                f"nodePool '{role.node_pool}' does not exist{hint} "
                f"(pools: {_names(p.name for p in all_pools)})",
            )
    if role.num_gpus == 0:
        return []  # CPU-only: any pool's nodes will do
    if not all_pools:
        return problem("num_gpus", "the cluster has no GPU pools")

    if role.gpu_model is not None:
        wanted = role.gpu_model.casefold()
        models = {p.gpu_model for p in all_pools}
        if wanted not in {m.casefold() for m in models}:
            hint = did_you_mean(role.gpu_model, models)
            return problem(
                "gpu_model", f"gpuModel '{role.gpu_model}' is in no pool{hint} (models: {_names(models)})"
            )
        matching = [p for p in pools if p.gpu_model.casefold() == wanted]
        if not matching:
            return problem(
                "gpu_model",
                f"nodePool '{role.node_pool}' has {pools[0].gpu_model} GPUs, not {role.gpu_model}",
            )
        pools = matching

    allowed = _vendors(role.vendor)
    matching = [p for p in pools if p.vendor in allowed]
    if not matching:
        found = _names(p.vendor.upper() for p in pools)
        if role.vendor == "nvidia":
            where = (
                f"nodePool '{role.node_pool}'"
                if role.node_pool
                else (f"gpuModel '{role.gpu_model}'" if role.gpu_model else "the cluster")
            )
            return problem(
                "vendor",
                f"{where} has only {found} GPUs and this job does not allow AMD "
                "(set vendor: any or amd; AMDSupport: true in the task form)",
            )
        return problem("vendor", f"no pool that matches has {role.vendor.upper()} GPUs (found {found})")
    pools = matching

    matching = [p for p in pools if role.sharing in p.sharing_modes]
    if not matching:
        offered = _names(m for p in pools for m in p.sharing_modes)
        if role.node_pool is not None:
            scope = f"nodePool '{role.node_pool}' does not offer"
        elif role.gpu_model is not None:
            scope = f"no pool with gpuModel '{role.gpu_model}' offers"
        else:
            scope = f"no {role.vendor.upper() if role.vendor != 'any' else 'GPU'} pool offers"
        return problem("sharing", f"{scope} sharing '{role.sharing}' (offered: {offered})")
    pools = matching

    if role.mig_profile is not None:
        matching = [p for p in pools if role.mig_profile in p.mig_profiles]
        if not matching:
            offered = _names(m for p in all_pools for m in p.mig_profiles)
            scope = "pool" if role.node_pool is None and role.gpu_model is None else "matching pool"
            return problem(
                "mig_profile", f"MIG profile {role.mig_profile} is offered by no {scope} (offered: {offered})"
            )
        pools = matching

    most = max(p.gpus_per_node for p in pools)
    if role.num_gpus > most:
        return problem(
            "num_gpus",
            f"{role.num_gpus} GPUs per replica is more than any node has (at most {most} per node)",
        )

    if role.sharing == "fraction" and role.gpu_mem_mib is not None:
        largest = max(p.gpu_memory_mib for p in pools)
        if role.gpu_mem_mib > largest:
            return problem(
                "gpu_mem_mib",
                f"gpuMemory {format_memory(role.gpu_mem_mib)} is larger than any GPU "
                f"(the largest has {format_memory(largest)})",
            )
    return []


def check_cluster(
    spec: JobSpec, cluster: ClusterInfo | None = None, workspace_queues: Collection[str] | None = None
) -> list[ClusterProblem]:
    problems = check_queue(spec.queue, workspace_queues)
    if cluster is not None:
        for index, role in enumerate(spec.roles):
            problems.extend(check_role(index, role, cluster))
    return problems
