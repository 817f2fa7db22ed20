"""Why a request does not fit or a job waits, as data: a reason code and its parameters (`Reason`).

The core words no reason. Every code it may give is in `CODES`; the catalogue (scheduling/reasons.py)
has an entry for each and renders a code in the reader's language, and the scheduling layer installs
its English at start-up (`render_reasons_with`) for `Reason.text`, the API, the logs and the
scheduler's own grouping of reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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


# Every code a reason of the core may carry. The core words none of them: its callers render a code
# and its figures in the reader's language (scheduling/reasons.py, the one catalogue, has an entry
# for each) and install its English for `Reason.text` (`render_reasons_with`).
CODES = frozenset({
    # one pool, one node, one GPU (pool-level texts read after a subject: "role 'main' ...")
    "pool_pinned_elsewhere", "pool_vendor_differs", "pool_model_differs", "pool_sharing_not_offered",
    "pool_mig_profile_not_offered", "pool_gpu_memory_too_small", "no_gpu_asked", "whole_gpus_busy",
    "gpu_share_busy", "gpu_memory_busy", "mig_instance_busy", "timeslice_slots_busy",
    # a whole cluster
    "pool_unknown", "no_gpu_pools", "gpu_model_not_offered", "pool_has_other_model", "amd_not_allowed",
    "vendor_not_offered", "sharing_not_offered", "mig_profile_not_offered", "too_many_gpus", "gpu_memory_too_large",
    # why a job is pending after a cycle
    "next_cycle", "evicted_requeued", "several", "role_no_pool", "role_short", "queue_over_limit",
    "queue_non_preemptible_quota", "fair_share_held", "reduce_cost_off_peak", "pool_no_node", "cpu_memory_short",
    "gpus_short", "gang_gpus_short", "gpus_not_on_one_node", "gpu_shares_short", "mig_none_free", "gang_mig_short",
    "timeslice_slots_short", "timeslice_not_on_one_node", "host_short", "gang_does_not_fit",
    "topology_no_domain", "topology_level_unknown",
    # a gang that waited past the backfill patience: nodes are held for it (`actions.reserve`)
    "backfill_reserved", "backfill_held",
    # a deadline job before its latest start (`deadline`)
    "deadline_waits_for_idle",
    # set by the scheduling layer outside a cycle
    "waiting_for_cycle", "waits_for_off_peak", "requeued", "node_drained", "budget_suspended",
    # dependencies and arrays (scheduling.lifecycle): what a Blocked job waits for, an array's window
    "waits_for_jobs", "array_window",
    "retry_backoff",
})


def _code_and_figures(code: str, params: dict[str, Any]) -> str:
    """A reason as it reads with no catalogue installed (the core on its own, e.g. in a benchmark)."""
    return f"{code} {params!r}"


_render: Callable[[str, dict[str, Any]], str] = _code_and_figures


def render_reasons_with(render: Callable[[str, dict[str, Any]], str]) -> None:
    """Let `render(code, params)` word reasons (`Reason.text`, `reason_text`): the scheduling layer
    installs the catalogue's English at start-up."""
    global _render
    _render = render


def lead_code(code: str, params: dict[str, Any]) -> str:
    """What blocks the job: the code of its first reason, figures and later parts aside, so
    "only 2 free in pool h100" and "only 3 free in pool h100; queue a holds..." are the same news."""
    while code == "several" and isinstance(params, dict) and params.get("parts"):
        code, params = params["parts"][0]["code"], params["parts"][0].get("params", {})
    return code


def reason_text(code: str, params: dict[str, Any]) -> str:
    """A reason code and its parameters as the installed renderer words them (English in the product)."""
    return _render(code, params)
