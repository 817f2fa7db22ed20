"""Why a request does not fit or a job waits, as data: a reason code and its parameters
(`Reason`), and the English text of each code (`reason_text`), for the API, the logs and the
scheduler's own grouping of reasons. `scheduling.reasons` renders the same codes in the reader's
language.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .units import MIB_PER_GIB, MILLI_PER_GPU


@dataclass(frozen=True)
class Reason:
    """A reason code and its parameters (JSON values; a nested reason is {"code", "params"})."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)
    # the rendered text, kept once known: a cycle shares reasons between thousands of jobs
    rendered: str | None = field(default=None, compare=False, repr=False, kw_only=True)

    @property
    def text(self) -> str:
        if self.rendered is None:
            object.__setattr__(self, "rendered", reason_text(self.code, self.params))
        return self.rendered

    def as_part(self) -> dict[str, Any]:
        """This reason as a parameter of another one."""
        return {"code": self.code, "params": self.params}


# ---------------------------------------------------------------------- readable text


def _names(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items))) or "none"


def _hint(params: dict[str, Any]) -> str:
    return f"; did you mean '{params['suggestion']}'?" if params.get("suggestion") else ""


def _memory(mib: int) -> str:
    if mib % (MIB_PER_GIB * MIB_PER_GIB) == 0:
        return f"{mib // (MIB_PER_GIB * MIB_PER_GIB)}Ti"
    return f"{mib // MIB_PER_GIB}Gi" if mib % MIB_PER_GIB == 0 else f"{mib}Mi"


def _gpus_number(milli: float) -> str:
    """1000 -> '1', 500 -> '0.5', 2500 -> '2.5'."""
    return f"{milli / MILLI_PER_GPU:.3f}".rstrip("0").rstrip(".")


def _gpus(milli: float) -> str:
    """1000 -> '1 GPU', 500 -> '0.5 GPU', 2500 -> '2.5 GPUs'."""
    return f"{_gpus_number(milli)} GPU{'s' if milli > MILLI_PER_GPU else ''}"


def _each(gpus: int) -> str:
    return f"{gpus} GPU{'s' if gpus > 1 else ''}"


def _part(part: dict[str, Any]) -> str:
    return reason_text(part["code"], part["params"])


def _amd_not_allowed(p: dict[str, Any]) -> str:
    where = (f"nodePool '{p['pool']}'" if p.get("pool")
             else f"gpuModel '{p['model']}'" if p.get("model") else "the cluster")
    return (f"{where} has only {_names(v.upper() for v in p['found'])} GPUs and this job does not allow AMD "
            "(set vendor: any or amd; AMDSupport: true in the task form)")


def _sharing_not_offered(p: dict[str, Any]) -> str:
    if p.get("pool"):
        scope = f"nodePool '{p['pool']}' does not offer"
    elif p.get("model"):
        scope = f"no pool with gpuModel '{p['model']}' offers"
    else:
        scope = f"no {p['vendor'].upper() if p['vendor'] != 'any' else 'GPU'} pool offers"
    return f"{scope} sharing '{p['sharing']}' (offered: {_names(p['offered'])})"


def _pool_vendor_differs(p: dict[str, Any]) -> str:
    hint = " (allow AMD with vendor: any, or AMDSupport: true)" if p["pool_vendor"] == "amd" else ""
    return f"needs {p['vendor'].upper()} GPUs, the pool has {p['pool_vendor'].upper()}{hint}"


# Code -> text. Pool-level texts read after a subject ("role 'main' ..."), the others stand alone.
REASONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "pool_pinned_elsewhere": lambda p: f"is pinned to nodePool '{p['requested']}'",
    "pool_vendor_differs": _pool_vendor_differs,
    "pool_model_differs": lambda p: f"asks gpuModel '{p['model']}', the pool has {p['pool_model']}",
    "pool_sharing_not_offered": lambda p: f"asks sharing '{p['sharing']}', the pool offers {_names(p['offered'])}",
    "pool_mig_profile_not_offered": lambda p: (f"asks MIG profile {p['profile']}, the pool offers "
                                               f"{_names(p['offered'])}"),
    "pool_gpu_memory_too_small": lambda p: (f"asks {_memory(p['asked_mib'])} of GPU memory, the pool's GPUs "
                                            f"have {_memory(p['pool_mib'])}"),
    "pool_unknown": lambda p: f"nodePool '{p['pool']}' does not exist{_hint(p)} (pools: {_names(p['pools'])})",
    "no_gpu_pools": lambda p: "the cluster has no GPU pools",
    "gpu_model_not_offered": lambda p: (f"gpuModel '{p['model']}' is in no pool{_hint(p)} "
                                        f"(models: {_names(p['offered'])})"),
    "pool_has_other_model": lambda p: f"nodePool '{p['pool']}' has {p['pool_model']} GPUs, not {p['model']}",
    "amd_not_allowed": _amd_not_allowed,
    "vendor_not_offered": lambda p: (f"no pool that matches has {p['vendor'].upper()} GPUs "
                                     f"(found {_names(v.upper() for v in p['found'])})"),
    "sharing_not_offered": _sharing_not_offered,
    "mig_profile_not_offered": lambda p: (f"MIG profile {p['profile']} is offered by no "
                                          f"{'matching pool' if p['narrowed'] else 'pool'} "
                                          f"(offered: {_names(p['offered'])})"),
    "too_many_gpus": lambda p: (f"{p['gpus']} GPUs per replica is more than any node has "
                                f"(at most {p['most']} per node)"),
    "gpu_memory_too_large": lambda p: (f"gpuMemory {_memory(p['asked_mib'])} is larger than any GPU "
                                       f"(the largest has {_memory(p['largest_mib'])})"),
    "no_gpu_asked": lambda p: "the replica asks no GPU",
    "whole_gpus_busy": lambda p: f"the node has {p['free']} wholly free GPUs, the replica asks {p['asked']}",
    "gpu_share_busy": lambda p: (f"the GPU has {p['free'] / MILLI_PER_GPU:g} GPU free, "
                                 f"the replica asks {p['asked'] / MILLI_PER_GPU:g}"),
    "gpu_memory_busy": lambda p: (f"the GPU has {_memory(p['free_mib'])} memory free, "
                                  f"the replica asks {_memory(p['asked_mib'])}"),
    "mig_instance_busy": lambda p: f"no free MIG {p['profile']} instance on the GPU",
    "timeslice_slots_busy": lambda p: "no free time-slice slot on the GPU",
    # why a job is pending after a cycle
    "next_cycle": lambda p: "waiting for the next cycle",
    "evicted_requeued": lambda p: f"evicted this cycle ({', '.join(p['reasons'])}); requeued",
    "several": lambda p: "; ".join(_part(x) for x in p["parts"]),
    "role_no_pool": lambda p: f"role {p['role']}: {_part(p['reason'])}",
    "role_short": lambda p: f"role {p['role']} {_part(p['reason'])}",
    "queue_over_limit": lambda p: (f"queue {p['queue']} is over its limit of {_gpus(p['limit_milli'])} "
                                   f"({_gpus(p['used_milli'])} in use, the job needs {_gpus(p['need_milli'])})"),
    "queue_non_preemptible_quota": lambda p: (
        f"non-preemptible work must fit in queue {p['queue']}'s deserved quota of {_gpus(p['deserved_milli'])} "
        f"({_gpus(p['used_milli'])} non-preemptible in use, the job needs {_gpus(p['need_milli'])})"),
    "fair_share_held": lambda p: (f"queue {p['queue']} already holds {_gpus(p['held_milli'])} of its fair share of "
                                  f"{_gpus(p['share_milli'])}, so it cannot reclaim from {', '.join(p['lenders'])}"),
    "reduce_cost_off_peak": lambda p: (
        "ReduceCost job: runs only off-peak "
        f"({'waits until ' + p['next_off_peak'] if p['next_off_peak'] else 'waits for the window'}), "
        "on a spot pool, or on idle capacity nobody else asks for"),
    "pool_no_node": lambda p: f"pool {p['pool']} has no schedulable node",
    "cpu_memory_short": lambda p: (f"needs {p['cpu_milli']} mCPU and {p['mem_mib']} MiB, "
                                   f"no node of pool {p['pool']} has that free"),
    "gpus_short": lambda p: f"needs {_each(p['gpus'])}, only {p['free']} free in pool {p['pool']}",
    "gang_gpus_short": lambda p: (f"gang needs {p['count'] * p['gpus']} GPUs ({_each(p['gpus'])} each), "
                                  f"only {p['free']} free in pool {p['pool']}"),
    "gpus_not_on_one_node": lambda p: (f"needs {_each(p['gpus'])} on one node, pool {p['pool']} has {p['free']} "
                                       f"free GPUs but at most {p['most']} on any node"),
    "gpu_shares_short": lambda p: (f"needs {p['count']} x {_gpus_number(p['gpu_milli'])} GPU"
                                   f"{' with ' + str(p['gpu_mem_mib']) + ' MiB' if p['gpu_mem_mib'] else ''}, "
                                   f"only {p['free']} GPUs in pool {p['pool']} have that free"),
    "mig_none_free": lambda p: f"no free MIG instance {p['profile']} in pool {p['pool']}",
    "gang_mig_short": lambda p: (f"gang needs {p['count']} MIG instances {p['profile']}, "
                                 f"only {p['free']} free in pool {p['pool']}"),
    "timeslice_slots_short": lambda p: (f"needs {p['slots']} time-slice slot{'s' if p['slots'] > 1 else ''}, "
                                        f"only {p['free']} free in pool {p['pool']}"),
    "timeslice_not_on_one_node": lambda p: (f"needs time-slice slots on {p['gpus']} GPUs of one node "
                                            f"in pool {p['pool']}"),
    "host_short": lambda p: f"not enough CPU or memory on the nodes of pool {p['pool']} that have GPU room",
    "gang_does_not_fit": lambda p: (f"the gang's {p['replicas']} replicas do not fit together in pool "
                                    f"{', '.join(p['pools'])}"),
    # set by the scheduling layer outside a cycle
    "waiting_for_cycle": lambda p: "waiting for the next scheduling cycle",
    "waits_for_off_peak": lambda p: f"waits for the off-peak window it was quoted for ({p['not_before']})",
    "requeued": lambda p: "requeued: waiting for the next cycle",
    "node_drained": lambda p: f"requeued: node {p['node']} was drained",
    "budget_suspended": lambda p: f"suspended: its workspace spent its budget; resumes {p['until']} or on a higher budget",
}


def lead_code(code: str, params: dict[str, Any]) -> str:
    """What blocks the job: the code of its first reason, figures and later parts aside, so
    "only 2 free in pool h100" and "only 3 free in pool h100; queue a holds..." are the same news."""
    while code == "several" and isinstance(params, dict) and params.get("parts"):
        code, params = params["parts"][0]["code"], params["parts"][0].get("params", {})
    return code


def reason_text(code: str, params: dict[str, Any]) -> str:
    """The readable English text of a reason code and its parameters."""
    return REASONS[code](params)
