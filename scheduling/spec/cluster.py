"""Can a spec run on this cluster at all? Checks against a description of the node pools (the core's
fit checks), said in the active language."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.utils.translation import gettext as _

from scheduling.core import model as cm
from scheduling.core.fit import PoolTraits, check_pools, closest
from scheduling.core.model import Request
from scheduling.core.topology import level_names
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


def check_cluster(
    spec: JobSpec, cluster: ClusterInfo | None = None, workspace_queues: Collection[str] | None = None
) -> list[ClusterProblem]:
    problems = check_queue(spec.queue, workspace_queues)
    if cluster is not None:
        for index, role in enumerate(spec.roles):
            problems.extend(check_role(index, role, cluster))
        problems.extend(check_topology(spec, cluster))
    return problems
