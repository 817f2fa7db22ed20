"""The catalogue of reason codes: why a job waits, and why no pool can run a spec, in the reader's
language. The one place a reason is worded.

The scheduler core (scheduling.core, no Django) returns a code and its figures only; the
scheduler stores them (Job.pending_code, pending_params) and, for the API, webhooks and the logs,
their English text (`english`, installed as the core's renderer at start-up, so `Reason.text`
reads the same). Pages and the API's *_text fields render the code here in the reader's language
(`reason_text`, `job_reason`); a code this module does not know, or figures it cannot read, fall
back to the stored English text."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from scheduling.core.units import MILLI_PER_GPU
from scheduling.formats import gettext as _
from scheduling.formats import gpus as _gpus
from scheduling.formats import gpus_number as _gpus_number
from scheduling.formats import in_english, ngettext, pgettext
from scheduling.formats import memory as _memory


def _names(items: Iterable[str]) -> str:
    return ", ".join(sorted(set(items))) or _("none")


def _upper_names(items: Iterable[str]) -> str:
    return _names(v.upper() for v in items)


def _hint(p: dict[str, Any]) -> str:
    return _("; did you mean '%(suggestion)s'?") % {"suggestion": p["suggestion"]} if p.get("suggestion") else ""


def _part(part: dict[str, Any]) -> str:
    return reason_text(part["code"], part["params"])


def _waited(p):
    figures = {"job": p["name"], "id": p["job"]}
    if p["condition"] == "failed":
        return _("job %(job)s (#%(id)s) to fail") % figures
    if p["condition"] == "finished":
        return _("job %(job)s (#%(id)s) to finish") % figures
    return _("job %(job)s (#%(id)s) to succeed") % figures


def _pool_vendor_differs(p):
    figures = {"vendor": p["vendor"].upper(), "pool_vendor": p["pool_vendor"].upper()}
    if p["pool_vendor"] == "amd":
        return _("needs %(vendor)s GPUs, the pool has %(pool_vendor)s (allow AMD with vendor: any, or AMDSupport: "
                 "true)") % figures
    return _("needs %(vendor)s GPUs, the pool has %(pool_vendor)s") % figures


def _amd_not_allowed(p):
    if p.get("pool"):
        where = _("nodePool '%(pool)s'") % {"pool": p["pool"]}
    elif p.get("model"):
        where = _("gpuModel '%(model)s'") % {"model": p["model"]}
    else:
        where = _("the cluster")
    return _("%(where)s has only %(found)s GPUs and this job does not allow AMD (set vendor: any or amd; "
             "AMDSupport: true in the task form)") % {"where": where, "found": _upper_names(p["found"])}


def _sharing_not_offered(p):
    figures = {"sharing": p["sharing"], "offered": _names(p["offered"])}
    if p.get("pool"):
        return _("nodePool '%(pool)s' does not offer sharing '%(sharing)s' (offered: %(offered)s)") % {
            **figures, "pool": p["pool"]}
    if p.get("model"):
        return _("no pool with gpuModel '%(model)s' offers sharing '%(sharing)s' (offered: %(offered)s)") % {
            **figures, "model": p["model"]}
    vendor = p["vendor"].upper() if p["vendor"] != "any" else "GPU"
    return _("no %(vendor)s pool offers sharing '%(sharing)s' (offered: %(offered)s)") % {**figures, "vendor": vendor}


def _mig_profile_not_offered(p):
    figures = {"profile": p["profile"], "offered": _names(p["offered"])}
    if p["narrowed"]:
        return _("MIG profile %(profile)s is offered by no matching pool (offered: %(offered)s)") % figures
    return _("MIG profile %(profile)s is offered by no pool (offered: %(offered)s)") % figures


def _reduce_cost_off_peak(p):
    if p["next_off_peak"]:
        return _("ReduceCost job: runs only off-peak (waits until %(next_off_peak)s), on a spot pool, or on idle "
                 "capacity nobody else asks for") % {"next_off_peak": p["next_off_peak"]}
    return _("ReduceCost job: runs only off-peak (waits for the window), on a spot pool, or on idle capacity nobody "
             "else asks for")


def _gpus_short(p):
    figures = {"gpus": p["gpus"], "free": p["free"], "pool": p["pool"]}
    if p["gpus"] > 1:
        return _("needs %(gpus)s GPUs, only %(free)s free in pool %(pool)s") % figures
    return _("needs %(gpus)s GPU, only %(free)s free in pool %(pool)s") % figures


def _gang_gpus_short(p):
    figures = {"total": p["count"] * p["gpus"], "gpus": p["gpus"], "free": p["free"], "pool": p["pool"]}
    if p["gpus"] > 1:
        return _("gang needs %(total)s GPUs (%(gpus)s GPUs each), only %(free)s free in pool %(pool)s") % figures
    return _("gang needs %(total)s GPUs (%(gpus)s GPU each), only %(free)s free in pool %(pool)s") % figures


def _gpus_not_on_one_node(p):
    figures = {"gpus": p["gpus"], "pool": p["pool"], "free": p["free"], "most": p["most"]}
    if p["gpus"] > 1:
        return _("needs %(gpus)s GPUs on one node, pool %(pool)s has %(free)s free GPUs but at most %(most)s on any "
                 "node") % figures
    return _("needs %(gpus)s GPU on one node, pool %(pool)s has %(free)s free GPUs but at most %(most)s on any "
             "node") % figures


def _gpu_shares_short(p):
    figures = {"count": p["count"], "share": _gpus_number(p["gpu_milli"]), "mem_mib": p["gpu_mem_mib"],
               "free": p["free"], "pool": p["pool"]}
    if p["gpu_mem_mib"]:
        return _("needs %(count)s x %(share)s GPU with %(mem_mib)s MiB, only %(free)s GPUs in pool %(pool)s have "
                 "that free") % figures
    return _("needs %(count)s x %(share)s GPU, only %(free)s GPUs in pool %(pool)s have that free") % figures


def _timeslice_slots_short(p):
    figures = {"slots": p["slots"], "free": p["free"], "pool": p["pool"]}
    if p["slots"] > 1:
        return _("needs %(slots)s time-slice slots, only %(free)s free in pool %(pool)s") % figures
    return _("needs %(slots)s time-slice slot, only %(free)s free in pool %(pool)s") % figures


# Code (scheduling.core.reasons.CODES) -> the text in the reader's language. Pool-level texts read after a
# subject ("role main ..."), the others stand alone.
REASONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "pool_pinned_elsewhere": lambda p: _("is pinned to nodePool '%(requested)s'") % p,
    "pool_vendor_differs": _pool_vendor_differs,
    "pool_model_differs": lambda p: _("asks gpuModel '%(model)s', the pool has %(pool_model)s") % p,
    "pool_sharing_not_offered": lambda p: _("asks sharing '%(sharing)s', the pool offers %(offered)s") % {
        "sharing": p["sharing"], "offered": _names(p["offered"])},
    "pool_mig_profile_not_offered": lambda p: _("asks MIG profile %(profile)s, the pool offers %(offered)s") % {
        "profile": p["profile"], "offered": _names(p["offered"])},
    "pool_gpu_memory_too_small": lambda p: _("asks %(asked)s of GPU memory, the pool's GPUs have %(pool)s") % {
        "asked": _memory(p["asked_mib"]), "pool": _memory(p["pool_mib"])},
    "pool_unknown": lambda p: _("nodePool '%(pool)s' does not exist%(hint)s (pools: %(pools)s)") % {
        "pool": p["pool"], "hint": _hint(p), "pools": _names(p["pools"])},
    "no_gpu_pools": lambda p: _("the cluster has no GPU pools"),
    "gpu_model_not_offered": lambda p: _("gpuModel '%(model)s' is in no pool%(hint)s (models: %(offered)s)") % {
        "model": p["model"], "hint": _hint(p), "offered": _names(p["offered"])},
    "pool_has_other_model": lambda p: _("nodePool '%(pool)s' has %(pool_model)s GPUs, not %(model)s") % p,
    "amd_not_allowed": _amd_not_allowed,
    "vendor_not_offered": lambda p: _("no pool that matches has %(vendor)s GPUs (found %(found)s)") % {
        "vendor": p["vendor"].upper(), "found": _upper_names(p["found"])},
    "sharing_not_offered": _sharing_not_offered,
    "mig_profile_not_offered": _mig_profile_not_offered,
    "too_many_gpus": lambda p: _("%(gpus)s GPUs per replica is more than any node has (at most %(most)s per "
                                 "node)") % p,
    "gpu_memory_too_large": lambda p: _("gpuMemory %(asked)s is larger than any GPU (the largest has "
                                        "%(largest)s)") % {"asked": _memory(p["asked_mib"]),
                                                           "largest": _memory(p["largest_mib"])},
    "no_gpu_asked": lambda p: _("the replica asks no GPU"),
    "whole_gpus_busy": lambda p: _("the node has %(free)s wholly free GPUs, the replica asks %(asked)s") % p,
    "gpu_share_busy": lambda p: _("the GPU has %(free)s GPU free, the replica asks %(asked)s") % {
        "free": f"{p['free'] / MILLI_PER_GPU:g}", "asked": f"{p['asked'] / MILLI_PER_GPU:g}"},
    "gpu_memory_busy": lambda p: _("the GPU has %(free)s memory free, the replica asks %(asked)s") % {
        "free": _memory(p["free_mib"]), "asked": _memory(p["asked_mib"])},
    "mig_instance_busy": lambda p: _("no free MIG %(profile)s instance on the GPU") % p,
    "timeslice_slots_busy": lambda p: _("no free time-slice slot on the GPU"),
    # why a job is pending after a cycle
    "next_cycle": lambda p: _("waiting for the next cycle"),
    "evicted_requeued": lambda p: _("evicted this cycle (%(reasons)s); requeued") % {"reasons": ", ".join(p["reasons"])},
    "several": lambda p: pgettext("between reasons", "; ").join(_part(x) for x in p["parts"]),
    "role_no_pool": lambda p: _("role %(role)s: %(reason)s") % {"role": p["role"], "reason": _part(p["reason"])},
    "role_short": lambda p: _("role %(role)s %(reason)s") % {"role": p["role"], "reason": _part(p["reason"])},
    "queue_over_limit": lambda p: _("queue %(queue)s is over its limit of %(limit)s (%(used)s in use, the job needs "
                                    "%(need)s)") % {"queue": p["queue"], "limit": _gpus(p["limit_milli"]),
                                                    "used": _gpus(p["used_milli"]), "need": _gpus(p["need_milli"])},
    "queue_non_preemptible_quota": lambda p: _(
        "non-preemptible work must fit in queue %(queue)s's deserved quota of %(deserved)s (%(used)s "
        "non-preemptible in use, the job needs %(need)s)") % {
        "queue": p["queue"], "deserved": _gpus(p["deserved_milli"]), "used": _gpus(p["used_milli"]),
        "need": _gpus(p["need_milli"])},
    "fair_share_held": lambda p: _("queue %(queue)s already holds %(held)s of its fair share of %(share)s, so it "
                                   "cannot reclaim from %(lenders)s") % {
        "queue": p["queue"], "held": _gpus(p["held_milli"]), "share": _gpus(p["share_milli"]),
        "lenders": ", ".join(p["lenders"])},
    "reduce_cost_off_peak": _reduce_cost_off_peak,
    "pool_no_node": lambda p: _("pool %(pool)s has no schedulable node") % p,
    "cpu_memory_short": lambda p: _("needs %(cpu_milli)s mCPU and %(mem_mib)s MiB, no node of pool %(pool)s has "
                                    "that free") % p,
    "gpus_short": _gpus_short,
    "gang_gpus_short": _gang_gpus_short,
    "gpus_not_on_one_node": _gpus_not_on_one_node,
    "gpu_shares_short": _gpu_shares_short,
    "mig_none_free": lambda p: _("no free MIG instance %(profile)s in pool %(pool)s") % p,
    "gang_mig_short": lambda p: _("gang needs %(count)s MIG instances %(profile)s, only %(free)s free in pool "
                                  "%(pool)s") % p,
    "timeslice_slots_short": _timeslice_slots_short,
    "timeslice_not_on_one_node": lambda p: _("needs time-slice slots on %(gpus)s GPUs of one node in pool "
                                             "%(pool)s") % p,
    "host_short": lambda p: _("not enough CPU or memory on the nodes of pool %(pool)s that have GPU room") % p,
    "gang_does_not_fit": lambda p: _("the gang's %(replicas)s replicas do not fit together in pool %(pools)s") % {
        "replicas": p["replicas"], "pools": ", ".join(p["pools"])},
    "topology_no_domain": lambda p: _("needs %(need)s within one %(level)s; the largest free %(level)s, "
                                      "%(domain)s, has %(free)s") % {
        "need": _gpus(p["need_milli"]), "level": p["level"], "domain": p["domain"], "free": _gpus(p["free_milli"])},
    "topology_level_unknown": lambda p: _("needs one %(level)s, but no node of pool %(pools)s is labelled with that "
                                          "level") % {"level": p["level"], "pools": ", ".join(p["pools"])},
    "backfill_reserved": lambda p: ngettext(
        "GPUs reserved: %(nodes)s node is held for this job (%(free)s of %(gpus)s GPUs free there so far)",
        "GPUs reserved: %(nodes)s nodes are held for this job (%(free)s of %(gpus)s GPUs free there so far)",
        p["nodes"]) % p,
    "backfill_held": lambda p: ngettext(
        "%(nodes)s node of pool %(pools)s is held for a bigger job that has waited longer",
        "%(nodes)s nodes of pool %(pools)s are held for bigger jobs that have waited longer",
        p["nodes"]) % {"nodes": p["nodes"], "pools": ", ".join(p["pools"])},
    "deadline_waits_for_idle": lambda p: _("deadline job: waits for idle GPUs until %(until)s, then starts for "
                                           "sure") % p,
    # set by the scheduling layer outside a cycle
    "waiting_for_cycle": lambda p: _("waiting for the next scheduling cycle"),
    "waits_for_off_peak": lambda p: _("waits for the off-peak window it was quoted for (%(not_before)s)") % p,
    "requeued": lambda p: _("requeued: waiting for the next cycle"),
    "retry_backoff": lambda p: _("failed; retries at %(until)s (retry back-off)") % p,
    "node_drained": lambda p: _("requeued: node %(node)s was drained") % p,
    # dependencies and arrays (scheduling.lifecycle)
    "waits_for_jobs": lambda p: _("waits for %(jobs)s") % {"jobs": pgettext("between reasons", "; ").join(
        _waited(x) for x in p["jobs"])},
    "array_window": lambda p: _("array of %(count)s indices: %(made)s started, at most %(parallelism)s at a "
                                "time") % p,
    "budget_suspended": lambda p: _("suspended: its workspace spent its budget; resumes %(until)s or on a higher "
                                    "budget") % p,
}


# What a pending gang's queue position means for it (scheduling.positions): texts by code.
POSITION_NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    "backfill_may_pass": lambda p: _("smaller jobs may start first while this one waits for %(gpus)s GPUs in one "
                                     "pool") % p,
    "gpus_reserved": lambda p: _("GPUs reserved: the scheduler keeps nodes free until this job's %(gpus)s GPUs "
                                 "are there") % p,
}


def position_note_text(code: str, params: dict[str, Any]) -> str:
    return POSITION_NOTES[code](params)


def reason_text(code: str, params: dict[str, Any]) -> str:
    """The text of a reason code and its figures in the active language. KeyError for an unknown code."""
    return REASONS[code](params)


def english(code: str, params: dict[str, Any]) -> str:
    """The English text of a reason code and its figures, whatever the active language: what the
    scheduler stores beside the code and the core's `Reason.text` reads."""
    return in_english(REASONS[code], params)


def text_or(code: str, params: Any, english: str) -> str:
    """The text of a code in the active language; `english` (its stored text) for a code this module
    does not know or figures of another shape."""
    if not code or code not in REASONS:
        return english
    try:
        return reason_text(code, params or {})
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # figures of another shape
        return english


def job_reason(job) -> str:
    """Why `job` waits, in the active language: its code and figures, else its stored English text."""
    return text_or(getattr(job, "pending_code", ""), job.pending_params, job.pending_reason)
