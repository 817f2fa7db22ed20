"""What each role of a submitted job asks the scheduler for, with the quoted option applied.

Pure: a JobSpec and the frozen quote option in, plain dicts out (stored on the Job, read by the
snapshot builder every cycle without parsing the spec again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling import kinds
from scheduling.core.units import MILLI_PER_GPU
from scheduling.spec import JobSpec, RoleSpec


def role_requests(spec: JobSpec, option: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One dict per role: the core's Request fields, the replica range and the launch details.

    A quoted option pins the pool and the way each role shares its GPUs (a tenant who picked
    "a100-spot.fraction.off-peak" gets exactly that, at the quoted price).
    """
    by_role = {r["name"]: r for r in (option or {}).get("roles", ())}
    pool = (option or {}).get("pool", "")
    return kinds.kind_of(spec).requests(spec, [_request(role, by_role.get(role.name), pool) for role in spec.roles])


def _request(role: RoleSpec, quoted: dict[str, Any] | None, pool: str) -> dict[str, Any]:
    mode, num_gpus, gpu_milli = role.sharing, role.num_gpus, role.gpu_milli
    gpu_mem_mib, mig_profile = role.gpu_mem_mib or 0, role.mig_profile or ""
    if quoted and quoted.get("num_gpus", 0) > 0:
        mode, num_gpus = quoted["sharing"], quoted["num_gpus"]
        gpu_milli = quoted.get("gpu_milli") or gpu_milli
        gpu_mem_mib = quoted.get("gpu_mem_mib") or 0
        mig_profile = quoted.get("mig_profile") or ""
    if mode in ("exclusive", "timeslice"):
        gpu_milli = MILLI_PER_GPU
    return {
        "name": role.name, "min_replicas": role.min_replicas, "max_replicas": role.max_replicas,
        "mode": mode if num_gpus else "exclusive", "num_gpus": num_gpus, "gpu_milli": gpu_milli,
        "gpu_mem_mib": gpu_mem_mib if mode == "fraction" else 0, "mig_profile": mig_profile if mode == "mig" else "",
        "cpu_milli": role.cpu_milli, "mem_mib": role.mem_mib, "vendor": role.vendor,
        "gpu_model": role.gpu_model or "", "pool": (pool if quoted else "") or role.node_pool or "",
        "image": role.image, "command": list(role.command), "env": dict(role.env),
        # names only: the values are read when a replica is launched (scheduling.secrets)
        "secret_env": dict(role.secret_env), "secret_mounts": [list(m) for m in role.secret_mounts],
    }


def job_topology(spec: JobSpec, option: Mapping[str, Any] | None) -> dict[str, str]:
    """Where the job's gang goes, as stored on the job: the spec's own `topology`, else the one of the
    quote option it runs with (a topology-constrained option), else {} (anywhere)."""
    if spec.topology is not None:
        return spec.topology.to_dict()
    chosen = (option or {}).get("topology") or {}
    return dict(chosen) if isinstance(chosen, Mapping) else {}
