"""Can a spec run on this cluster at all? Checks against a description of the node pools (the core's
fit checks), said in the active language."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.utils.translation import gettext as _

from scheduling.core import model as cm
from scheduling.core.fit import PoolTraits, check_pool, check_pools, closest
from scheduling.core.model import NODE_LEVEL, Request, level_name
from scheduling.core.topology import level_names
from scheduling.core.units import gpu_model_name
from scheduling.reasons import reason_text
from scheduling.spec.model import JobSpec, RoleSpec

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
    topology_levels: tuple[str, ...] = ()  # node label keys, outermost first
    # (label key, GPUs of the largest domain of that level) for each of `topology_levels`
    domain_gpus: tuple[tuple[str, int], ...] = ()

    @property
    def traits(self) -> PoolTraits:
        return PoolTraits(self.name, self.vendor, self.gpu_model, self.gpu_memory_mib, frozenset(self.sharing_modes),
                          frozenset(self.mig_profiles), self.gpus_per_node)


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
    close = closest(word, choices)
    return _("; did you mean '%(suggestion)s'?") % {"suggestion": close} if close else ""


def _names(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items))) or _("none")


def check_queue(queue: str | None, workspace_queues: Collection[str] | None) -> list[ClusterProblem]:
    if queue is None or workspace_queues is None or queue in workspace_queues:
        return []
    hint = did_you_mean(queue, workspace_queues)
    return [
        ClusterProblem(
            None,
            "queue",
            _("queue '%(queue)s' is not open to this workspace%(hint)s (open: %(open)s)") % {
                "queue": queue, "hint": hint, "open": _names(workspace_queues)},
        )
    ]


# Request fields (the fit module's) -> the RoleSpec attributes they come from.
_ROLE_ATTR = {"pool": "node_pool", "mode": "sharing"}


def role_request(role: RoleSpec) -> Request:
    """What the fit checks need of a role, as the core's Request."""
    return Request(
        mode=role.sharing if role.num_gpus else "exclusive", num_gpus=role.num_gpus, gpu_milli=role.gpu_milli,
        gpu_mem_mib=(role.gpu_mem_mib or 0) if role.sharing == "fraction" else 0,
        mig_profile=role.mig_profile or "", vendor=role.vendor, gpu_model=role.gpu_model or "",
        pool=role.node_pool or "",
    )


def check_role(index: int, role: RoleSpec, cluster: ClusterInfo) -> list[ClusterProblem]:
    """The first constraint of the role that no pool can meet, if any."""
    unfit = check_pools([p.traits for p in cluster.pools], role_request(role))
    if unfit is None:
        return []
    reason = reason_text(unfit.code, unfit.params)
    return [ClusterProblem(index, _ROLE_ATTR.get(unfit.field, unfit.field),
                           _("role '%(role)s': %(reason)s") % {"role": role.name, "reason": reason})]


def check_topology(spec: JobSpec, cluster: ClusterInfo) -> list[ClusterProblem]:
    """A topology level no pool declares: a required gang would wait for ever, a preferred one gains nothing."""
    if spec.topology is None:
        return []
    levels = level_names(cm.Pool(p.name, topology=tuple(p.topology_levels)) for p in cluster.pools)
    if spec.topology.level in levels:
        return []
    short = sorted(n for n in levels if "/" not in n)
    return [ClusterProblem(None, "topology", _("no pool has the topology level '%(level)s' (levels: %(levels)s)%(hint)s")
                           % {"level": spec.topology.level, "levels": ", ".join(short),
                              "hint": did_you_mean(spec.topology.level, short)})]


def largest_domain(pool: PoolInfo, level: str) -> int | None:
    """GPUs of the pool's largest domain of `level` (a label key or its last part, or the node); None
    when the pool has no such level."""
    if level == NODE_LEVEL:
        return pool.gpus_per_node
    for key, gpus in pool.domain_gpus:
        if level in (key, level_name(key)):
            return gpus
    return None


def check_gang_size(spec: JobSpec, cluster: ClusterInfo) -> list[ClusterProblem]:
    """A gang of whole GPUs with a required topology bigger than the largest domain of its level in every pool
    that serves it could never start: refused, with the figures. (A gang bigger than every pool is the quote's
    refusal, `pool_too_small`: a job runs in the one pool of the option it was submitted with.)"""
    topology = spec.topology
    whole = [r for r in spec.roles if r.sharing == "exclusive" and r.num_gpus > 0]
    if topology is None or not topology.required or not whole:
        return []
    need = sum(r.min_replicas * r.num_gpus for r in whole)
    serving = [p for p in cluster.pools if any(check_pool(p.traits, role_request(r)) is None for r in whole)]
    sizes = [size for p in serving if (size := largest_domain(p, topology.level)) is not None]
    if not sizes or need <= max(sizes):
        return []
    return [ClusterProblem(None, "topology", _(
        "the gang needs %(need)s GPUs within one %(level)s, but the largest %(level)s of pool %(pools)s "
        "has %(largest)s GPUs: it could never start") % {
        "need": need, "level": topology.level, "pools": ", ".join(p.name for p in serving), "largest": max(sizes)})]


def check_document(doc: object, cluster: ClusterInfo | None, workspace_queues: Collection[str] | None,
                   ) -> list[tuple[tuple, str]]:
    """What can be checked against the cluster in a document that could not be read whole: its queue and each
    GPU model it names (at the top, or in a role of `roles`), as (path, message); so a spec with other errors
    reports these too, all at once."""
    if not isinstance(doc, dict):
        return []
    queue = doc.get("queue")
    found = [(("queue",), p.message) for p in check_queue(queue if isinstance(queue, str) else None,
                                                          workspace_queues)]
    if cluster is None or not cluster.pools:
        return found
    roles = doc.get("roles")
    places = [((), doc)] + ([(("roles", i), role) for i, role in enumerate(roles) if isinstance(role, dict)]
                            if isinstance(roles, list) else [])
    offered = sorted({p.gpu_model for p in cluster.pools})
    for path, mapping in places:
        model = mapping.get("gpuModel")
        if not isinstance(model, str) or not model.strip():
            continue
        name = gpu_model_name(model)
        if name not in offered:
            found.append(((*path, "gpuModel"), reason_text("gpu_model_not_offered", {
                "model": name, "offered": offered, "suggestion": closest(name, offered)})))
    return found


def check_cluster(
    spec: JobSpec, cluster: ClusterInfo | None = None, workspace_queues: Collection[str] | None = None
) -> list[ClusterProblem]:
    problems = check_queue(spec.queue, workspace_queues)
    if cluster is not None:
        for index, role in enumerate(spec.roles):
            problems.extend(check_role(index, role, cluster))
        problems.extend(check_topology(spec, cluster))
        if not problems:
            problems.extend(check_gang_size(spec, cluster))
    return problems
