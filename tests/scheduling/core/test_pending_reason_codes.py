"""Pending reasons are codes with parameters; the readable text is rendered from them."""

import json
from dataclasses import replace

import pytest

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, with_jobs
from scheduling.core.reasons import CODES, Reason, reason_text


def part(code, **params):
    return {"code": code, "params": params}


# One example per code: a new code without an example fails `test_every_code_has_an_example`.
EXAMPLES = {
    # fit: pools, cluster, node and GPU
    "pool_pinned_elsewhere": ({"pool": "a", "requested": "b"}, "is pinned to nodePool 'b'"),
    "pool_vendor_differs": ({"vendor": "nvidia", "pool_vendor": "amd"},
                            "needs NVIDIA GPUs, the pool has AMD (allow AMD with vendor: any, or AMDSupport: true)"),
    "pool_model_differs": ({"model": "A100", "pool_model": "H100"}, "asks gpuModel 'A100', the pool has H100"),
    "pool_sharing_not_offered": ({"sharing": "mig", "offered": ["exclusive"]},
                                 "asks sharing 'mig', the pool offers exclusive"),
    "pool_mig_profile_not_offered": ({"profile": "1g.5gb", "offered": []},
                                     "asks MIG profile 1g.5gb, the pool offers none"),
    "pool_gpu_memory_too_small": ({"asked_mib": 81920, "pool_mib": 40960},
                                  "asks 80Gi of GPU memory, the pool's GPUs have 40Gi"),
    "pool_unknown": ({"pool": "h10", "pools": ["h100"], "suggestion": "h100"},
                     "nodePool 'h10' does not exist; did you mean 'h100'? (pools: h100)"),
    "no_gpu_pools": ({}, "the cluster has no GPU pools"),
    "gpu_model_not_offered": ({"model": "X", "offered": ["H100"], "suggestion": None},
                              "gpuModel 'X' is in no pool (models: H100)"),
    "pool_has_other_model": ({"pool": "p", "pool_model": "H100", "model": "A100"},
                             "nodePool 'p' has H100 GPUs, not A100"),
    "amd_not_allowed": ({"pool": "", "model": "", "found": ["amd"]},
                        "the cluster has only AMD GPUs and this job does not allow AMD "
                        "(set vendor: any or amd; AMDSupport: true in the task form)"),
    "vendor_not_offered": ({"vendor": "amd", "found": ["nvidia"]},
                           "no pool that matches has AMD GPUs (found NVIDIA)"),
    "sharing_not_offered": ({"sharing": "mig", "offered": ["exclusive"], "pool": "", "model": "", "vendor": "any"},
                            "no GPU pool offers sharing 'mig' (offered: exclusive)"),
    "mig_profile_not_offered": ({"profile": "7g", "offered": ["1g"], "narrowed": False},
                                "MIG profile 7g is offered by no pool (offered: 1g)"),
    "too_many_gpus": ({"gpus": 16, "most": 8}, "16 GPUs per replica is more than any node has (at most 8 per node)"),
    "gpu_memory_too_large": ({"asked_mib": 204800, "largest_mib": 81920},
                             "gpuMemory 200Gi is larger than any GPU (the largest has 80Gi)"),
    "no_gpu_asked": ({}, "the replica asks no GPU"),
    "whole_gpus_busy": ({"asked": 2, "free": 1}, "the node has 1 wholly free GPUs, the replica asks 2"),
    "gpu_share_busy": ({"asked": 500, "free": 250}, "the GPU has 0.25 GPU free, the replica asks 0.5"),
    "gpu_memory_busy": ({"asked_mib": 2048, "free_mib": 1024}, "the GPU has 1Gi memory free, the replica asks 2Gi"),
    "mig_instance_busy": ({"profile": "1g.5gb"}, "no free MIG 1g.5gb instance on the GPU"),
    "timeslice_slots_busy": ({}, "no free time-slice slot on the GPU"),
    # pending: the cycle
    "next_cycle": ({}, "waiting for the next cycle"),
    "evicted_requeued": ({"reasons": ["preempt", "reclaim"]}, "evicted this cycle (preempt, reclaim); requeued"),
    "several": ({"parts": [part("next_cycle"), part("no_gpu_pools")]},
                "waiting for the next cycle; the cluster has no GPU pools"),
    "role_no_pool": ({"role": "main", "reason": part("no_gpu_pools")}, "role main: the cluster has no GPU pools"),
    "role_short": ({"role": "main", "reason": part("pool_no_node", pool="h100")},
                   "role main pool h100 has no schedulable node"),
    # pending: quotas
    "queue_over_limit": ({"queue": "a", "limit_milli": 2000, "used_milli": 2000, "need_milli": 500},
                         "queue a is over its limit of 2 GPUs (2 GPUs in use, the job needs 0.5 GPU)"),
    "queue_non_preemptible_quota": (
        {"queue": "a", "deserved_milli": 1000, "used_milli": 1000, "need_milli": 1000},
        "non-preemptible work must fit in queue a's deserved quota of 1 GPU "
        "(1 GPU non-preemptible in use, the job needs 1 GPU)"),
    "fair_share_held": ({"queue": "b", "held_milli": 1000, "share_milli": 2000, "lenders": ["a", "c"]},
                        "queue b already holds 1 GPU of its fair share of 2 GPUs, so it cannot reclaim from a, c"),
    # pending: ReduceCost
    "reduce_cost_off_peak": ({"next_off_peak": "00:00"},
                             "ReduceCost job: runs only off-peak (waits until 00:00), on a spot pool, "
                             "or on idle capacity nobody else asks for"),
    # pending: capacity
    "pool_no_node": ({"pool": "h100"}, "pool h100 has no schedulable node"),
    "cpu_memory_short": ({"cpu_milli": 500, "mem_mib": 1024, "pool": "cpu"},
                         "needs 500 mCPU and 1024 MiB, no node of pool cpu has that free"),
    "gpus_short": ({"gpus": 3, "free": 2, "pool": "h100"}, "needs 3 GPUs, only 2 free in pool h100"),
    "gang_gpus_short": ({"count": 3, "gpus": 1, "free": 2, "pool": "h100"},
                        "gang needs 3 GPUs (1 GPU each), only 2 free in pool h100"),
    "gpus_not_on_one_node": ({"gpus": 2, "free": 2, "most": 1, "pool": "h100"},
                             "needs 2 GPUs on one node, pool h100 has 2 free GPUs but at most 1 on any node"),
    "gpu_shares_short": ({"count": 1, "gpu_milli": 600, "gpu_mem_mib": 10000, "free": 0, "pool": "v100"},
                         "needs 1 x 0.6 GPU with 10000 MiB, only 0 GPUs in pool v100 have that free"),
    "mig_none_free": ({"profile": "1g.5gb", "pool": "a100"}, "no free MIG instance 1g.5gb in pool a100"),
    "gang_mig_short": ({"count": 3, "profile": "1g.5gb", "free": 1, "pool": "a100"},
                       "gang needs 3 MIG instances 1g.5gb, only 1 free in pool a100"),
    "timeslice_slots_short": ({"slots": 1, "free": 0, "pool": "ts"}, "needs 1 time-slice slot, only 0 free in pool ts"),
    "timeslice_not_on_one_node": ({"gpus": 2, "pool": "ts"}, "needs time-slice slots on 2 GPUs of one node in pool ts"),
    "host_short": ({"pool": "h100"}, "not enough CPU or memory on the nodes of pool h100 that have GPU room"),
    "gang_does_not_fit": ({"replicas": 4, "pools": ["a", "b"]},
                          "the gang's 4 replicas do not fit together in pool a, b"),
    "topology_no_domain": ({"level": "rack", "need_milli": 16000, "domain": "b1/r2", "free_milli": 12000},
                           "needs 16 GPUs within one rack; the largest free rack, b1/r2, has 12 GPUs"),
    "topology_level_unknown": ({"level": "rack", "pools": ["h100"]},
                               "needs one rack, but no node of pool h100 is labelled with that level"),
    # pending: a deadline job before its latest start
    "backfill_reserved": ({"nodes": 2, "gpus": 16, "free": 9},
                          "GPUs reserved: 2 nodes are held for this job (9 of 16 GPUs free there so far)"),
    "backfill_held": ({"pools": ["h100"], "nodes": 2},
                      "2 nodes of pool h100 are held for bigger jobs that have waited longer"),
    "deadline_waits_for_idle": ({"until": "2026-12-01 02:10 UTC", "latest_start": 1796091000.0},
                                "deadline job: waits for idle GPUs until 2026-12-01 02:10 UTC, then starts for sure"),
    # pending: outside the cycle
    "waiting_for_cycle": ({}, "waiting for the next scheduling cycle"),
    "waits_for_off_peak": ({"not_before": "2026-01-01 22:00"},
                           "waits for the off-peak window it was quoted for (2026-01-01 22:00)"),
    "requeued": ({}, "requeued: waiting for the next cycle"),
    "node_drained": ({"node": "h100-01"}, "requeued: node h100-01 was drained"),
    "budget_suspended": ({"until": "2026-04-01 00:00"},
                         "suspended: its workspace spent its budget; resumes 2026-04-01 00:00 or on a higher budget"),
    # a job's life: what a Blocked job waits for, an array's window, a retry's back-off
    "waits_for_jobs": ({"jobs": [{"job": 12, "name": "prep", "condition": "succeeded"},
                                 {"job": 13, "name": "eval", "condition": "finished"}]},
                       "waits for job prep (#12) to succeed; job eval (#13) to finish"),
    "array_window": ({"count": 100, "made": 20, "parallelism": 10},
                     "array of 100 indices: 20 started, at most 10 at a time"),
    "retry_backoff": ({"until": "2026-12-01 00:00:30"}, "failed; retries at 2026-12-01 00:00:30 (retry back-off)"),
}


def test_every_code_has_an_example():
    assert set(EXAMPLES) == set(CODES)


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_every_code_renders(code):
    params, text = EXAMPLES[code]
    assert reason_text(code, params) == text
    assert Reason(code, params).text == text
    assert json.loads(json.dumps(params)) == params


def assert_structured(decisions):
    assert set(decisions.pending_codes) == set(decisions.pending)
    for job_id, reason in decisions.pending_codes.items():
        assert isinstance(reason, Reason)
        assert reason.text == decisions.pending[job_id]
        assert json.loads(json.dumps(reason.params)) == reason.params   # storable as JSON


def test_no_pool_is_a_role_no_pool_reason_around_the_fit_reason():
    a100 = Pool("a100", gpu_model="A100-40GB", sharing=frozenset({"mig"}),
                mig_layout=("1g.5gb", "2g.10gb"))
    snap = Snapshot(pools=(a100,), nodes=nodes("a100", 1, 1), queues=(Queue("q"),),
                    jobs=(job("j", "q", mode="mig", mig="7g.80gb"),))
    d = run_cycle(snap)
    assert_structured(d)
    reason = d.pending_codes["j"]
    assert reason.code == "role_no_pool"
    assert reason.params == {"role": "worker", "reason": part("mig_profile_not_offered", profile="7g.80gb",
                                                                offered=["1g.5gb", "2g.10gb"], narrowed=False)}
    assert d.pending["j"] == "role worker: MIG profile 7g.80gb is offered by no pool (offered: 1g.5gb, 2g.10gb)"


def test_capacity_reason_has_the_figures_as_params():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 2), queues=(Queue("q"),),
                    jobs=(job("gang", "q", replicas=3), job("z", "q", gpus=3)))
    d = run_cycle(snap)
    assert_structured(d)
    assert d.pending_codes["gang"] == Reason("gang_gpus_short", {"count": 3, "gpus": 1, "free": 2, "pool": "h100"})
    assert d.pending_codes["z"] == Reason("gpus_short", {"gpus": 3, "free": 2, "pool": "h100"})


def test_quota_reason():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 4), queues=(Queue("team-a", limit_milli=2000),),
                    jobs=tuple(job(f"a{i}", "team-a", created=i) for i in range(1, 4)))
    d = run_cycle(snap)
    assert_structured(d)
    assert d.pending_codes["a3"] == Reason("queue_over_limit", {"queue": "team-a", "limit_milli": 2000,
                                                                 "used_milli": 2000, "need_milli": 1000})


def test_capacity_reason_with_the_fair_share_it_cannot_reclaim_beyond():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 4),
                    queues=(Queue("team-a", deserved_milli=1000), Queue("team-b", deserved_milli=1000)),
                    jobs=(*(job(f"a{i}", "team-a", created=i) for i in range(3)), job("b1", "team-b", created=5)))
    snap, _ = cycles(snap, 1)
    _, [d] = cycles(with_jobs(snap, job("b2", "team-b", gpus=2, created=6)), 1)
    assert_structured(d)
    reason = d.pending_codes["b2"]
    assert reason.code == "several"
    assert reason.params["parts"] == [
        part("gpus_short", gpus=2, free=0, pool="h100"),
        part("fair_share_held", queue="team-b", held_milli=1000, share_milli=2000.0, lenders=["team-a"]),
    ]


def test_reduce_cost_reasons():
    snap = Snapshot(pools=(Pool("onprem"),), nodes=nodes("onprem", 1, 2), queues=(Queue("research"), Queue("cheap")),
                    jobs=(job("big", "research", replicas=3), job("saver", "cheap", reduce_cost=True, created=1)),
                    off_peak=False, next_off_peak="00:00")
    d = run_cycle(snap)
    assert_structured(d)
    assert d.pending_codes["saver"] == Reason("reduce_cost_off_peak", {"next_off_peak": "00:00"})
    # a waiting ReduceCost job short of capacity: both reasons, ReduceCost first
    snap = replace(snap, nodes=nodes("onprem", 1, 1),
                   jobs=(job("saver2", "cheap", gpus=2, reduce_cost=True, created=1),))
    snap = replace(snap, pools=(Pool("onprem"), Pool("spot", spot=True)), nodes=snap.nodes + nodes("spot", 1, 1))
    d = run_cycle(snap)
    assert_structured(d)
    reason = d.pending_codes["saver2"]
    assert reason.code == "several"
    assert [p["code"] for p in reason.params["parts"]] == ["reduce_cost_off_peak", "gpus_short"]
    assert d.pending["saver2"].startswith("ReduceCost job: runs only off-peak (waits until 00:00)")


def test_multi_role_capacity_parts_name_their_role():
    from scheduling.core import Job, Request, Role

    gang = Job("mpi", "q", (Role("launcher", Request(num_gpus=0, cpu_milli=2000), 1, 1),
                            Role("worker", Request(num_gpus=2), 2, 2)))
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 2), queues=(Queue("q"),), jobs=(gang,))
    d = run_cycle(snap)
    assert_structured(d)
    assert d.pending_codes["mpi"] == Reason("role_short", {
        "role": "worker", "reason": part("gang_gpus_short", count=2, gpus=2, free=2, pool="h100")})
    assert d.pending["mpi"] == "role worker gang needs 4 GPUs (2 GPUs each), only 2 free in pool h100"


def test_evicted_and_requeued_reason():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 1), queues=(Queue("q"),),
                    jobs=(job("low", "q", priority=1),))
    snap, _ = cycles(snap, 1)
    d = run_cycle(with_jobs(snap, job("high", "q", priority=50, created=1)))
    assert_structured(d)
    assert d.pending_codes["low"] == Reason("evicted_requeued", {"reasons": ["preempt"]})
