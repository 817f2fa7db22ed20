"""Why a job waits, in the reader's language (scheduling.reasons, the one catalogue): each code the
scheduler core may give has one entry, read in English and in Chinese with the same figures; the core
itself words none (its reasons read through the installed catalogue); an unknown code or figures of
another shape fall back to the stored English text; pages show it."""

import re

import pytest
from django.utils import translation

from scheduling import reasons as pending_reasons
from scheduling.core import reasons as core_reasons
from scheduling.models import Job

PART = {"code": "gpus_short", "params": {"gpus": 8, "free": 2, "pool": "h100"}}

# Figures for every code, chosen to reach each branch of its text.
SAMPLES = [
    ("pool_pinned_elsewhere", {"requested": "h100"}),
    ("pool_vendor_differs", {"vendor": "nvidia", "pool_vendor": "amd"}),
    ("pool_vendor_differs", {"vendor": "amd", "pool_vendor": "nvidia"}),
    ("pool_model_differs", {"model": "A100-80GB", "pool_model": "H100-80GB"}),
    ("pool_sharing_not_offered", {"sharing": "mig", "offered": ["exclusive", "fraction"]}),
    ("pool_mig_profile_not_offered", {"profile": "7g.80gb", "offered": []}),
    ("pool_gpu_memory_too_small", {"asked_mib": 81920, "pool_mib": 49152}),
    ("pool_unknown", {"pool": "h10", "suggestion": "h100", "pools": ["h100", "a100-spot"]}),
    ("pool_unknown", {"pool": "zzz", "pools": ["h100"]}),
    ("no_gpu_pools", {}),
    ("gpu_model_not_offered", {"model": "B200", "offered": ["H100-80GB"]}),
    ("gpu_model_not_offered", {"model": "H100-80G", "suggestion": "H100-80GB", "offered": ["H100-80GB"]}),
    ("pool_has_other_model", {"pool": "h100", "pool_model": "H100-80GB", "model": "A100-80GB"}),
    ("amd_not_allowed", {"pool": "mi300x", "found": ["amd"]}),
    ("amd_not_allowed", {"model": "MI300X-192GB", "found": ["amd"]}),
    ("amd_not_allowed", {"found": ["amd"]}),
    ("vendor_not_offered", {"vendor": "amd", "found": ["nvidia"]}),
    ("sharing_not_offered", {"pool": "h100", "sharing": "mig", "offered": ["exclusive"], "vendor": "any"}),
    ("sharing_not_offered", {"model": "H100-80GB", "sharing": "timeslice", "offered": ["mig"], "vendor": "any"}),
    ("sharing_not_offered", {"vendor": "amd", "sharing": "mig", "offered": ["exclusive"]}),
    ("sharing_not_offered", {"vendor": "any", "sharing": "mig", "offered": []}),
    ("mig_profile_not_offered", {"profile": "7g.80gb", "narrowed": True, "offered": ["1g.10gb"]}),
    ("mig_profile_not_offered", {"profile": "7g.80gb", "narrowed": False, "offered": ["1g.10gb"]}),
    ("too_many_gpus", {"gpus": 16, "most": 8}),
    ("gpu_memory_too_large", {"asked_mib": 1024 * 1024 * 2, "largest_mib": 196608}),
    ("no_gpu_asked", {}),
    ("whole_gpus_busy", {"free": 1, "asked": 2}),
    ("gpu_share_busy", {"free": 300, "asked": 500}),
    ("gpu_memory_busy", {"free_mib": 10240, "asked_mib": 10300}),
    ("mig_instance_busy", {"profile": "3g.40gb"}),
    ("timeslice_slots_busy", {}),
    ("next_cycle", {}),
    ("evicted_requeued", {"reasons": ["reclaimed by queue a", "node lost"]}),
    ("several", {"parts": [PART, {"code": "pool_no_node", "params": {"pool": "a100-spot"}}]}),
    ("role_no_pool", {"role": "worker", "reason": {"code": "pool_pinned_elsewhere", "params": {"requested": "h100"}}}),
    ("role_short", {"role": "worker", "reason": PART}),
    ("queue_over_limit", {"queue": "vision-lab", "limit_milli": 16000, "used_milli": 15500, "need_milli": 1000}),
    ("queue_non_preemptible_quota", {"queue": "vision-lab", "deserved_milli": 1000, "used_milli": 500,
                                     "need_milli": 500}),
    ("fair_share_held", {"queue": "vision-lab", "held_milli": 8000, "share_milli": 8000,
                         "lenders": ["nlp-group", "community"]}),
    ("reduce_cost_off_peak", {"next_off_peak": "2026-11-25 00:00 CST"}),
    ("reduce_cost_off_peak", {"next_off_peak": ""}),
    ("pool_no_node", {"pool": "h100"}),
    ("cpu_memory_short", {"cpu_milli": 64000, "mem_mib": 524288, "pool": "h100"}),
    ("gpus_short", {"gpus": 1, "free": 0, "pool": "h100"}),
    ("gpus_short", {"gpus": 8, "free": 2, "pool": "h100"}),
    ("gang_gpus_short", {"count": 4, "gpus": 8, "free": 16, "pool": "h100"}),
    ("gang_gpus_short", {"count": 4, "gpus": 1, "free": 2, "pool": "h100"}),
    ("gpus_not_on_one_node", {"gpus": 8, "pool": "h100", "free": 9, "most": 5}),
    ("gpus_not_on_one_node", {"gpus": 1, "pool": "h100", "free": 0, "most": 0}),
    ("gpu_shares_short", {"count": 2, "gpu_milli": 500, "gpu_mem_mib": 10240, "free": 1, "pool": "l40s-shared"}),
    ("gpu_shares_short", {"count": 3, "gpu_milli": 250, "gpu_mem_mib": 0, "free": 0, "pool": "l40s-shared"}),
    ("mig_none_free", {"profile": "1g.10gb", "pool": "h100-mig"}),
    ("gang_mig_short", {"count": 4, "profile": "1g.10gb", "free": 2, "pool": "h100-mig"}),
    ("timeslice_slots_short", {"slots": 1, "free": 0, "pool": "l40s-shared"}),
    ("timeslice_slots_short", {"slots": 3, "free": 1, "pool": "l40s-shared"}),
    ("timeslice_not_on_one_node", {"gpus": 4, "pool": "l40s-shared"}),
    ("host_short", {"pool": "h100"}),
    ("gang_does_not_fit", {"replicas": 4, "pools": ["h100", "a100-spot"]}),
    ("topology_no_domain", {"level": "rack", "need_milli": 16000, "domain": "b1/r2", "free_milli": 12000}),
    ("topology_level_unknown", {"level": "rack", "pools": ["h100"]}),
    ("waiting_for_cycle", {}),
    ("waits_for_off_peak", {"not_before": "2026-11-25 00:00"}),
    ("requeued", {}),
    ("node_drained", {"node": "h100-01"}),
    ("budget_suspended", {"until": "2026-12-01 00:00 CST"}),
    ("waits_for_jobs", {"jobs": [{"job": 12, "name": "prep", "condition": "succeeded"},
                                 {"job": 13, "name": "eval", "condition": "finished"}]}),
    ("array_window", {"count": 100, "made": 20, "parallelism": 10}),
    ("retry_backoff", {"until": "2026-12-01 00:00:30 CST"}),
    ("backfill_reserved", {"nodes": 2, "gpus": 16, "free": 9}),
    ("backfill_held", {"pools": ["h100"], "nodes": 2}),
    ("deadline_waits_for_idle", {"until": "2026-12-01 02:10 UTC", "latest_start": 1796091000.0}),
]
# codes whose texts the catalogue translates after the merge: their Chinese reading fails until then (strict,
# so the mark is taken off once it reads in Chinese)
AWAITING_TRANSLATION: set[str] = set()
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_code_of_the_core_has_one_entry():
    assert set(pending_reasons.REASONS) == set(core_reasons.CODES)
    assert {code for code, _ in SAMPLES} == set(core_reasons.CODES)


def test_the_core_words_no_reason_itself():
    assert not hasattr(core_reasons, "REASONS")
    assert core_reasons._code_and_figures("gpus_short", {"gpus": 8}) == "gpus_short {'gpus': 8}"  # the core on its own
    assert core_reasons.reason_text("gpus_short", PART["params"]) == "needs 8 GPUs, only 2 free in pool h100"  # the catalogue's
    assert core_reasons.Reason("gpus_short", PART["params"]).text == pending_reasons.english("gpus_short", PART["params"])


@pytest.mark.parametrize(("code", "params", "english"), [
    ("gpus_short", {"gpus": 1, "free": 0, "pool": "h100"}, "needs 1 GPU, only 0 free in pool h100"),
    ("gpu_memory_too_large", {"asked_mib": 1024 * 1024 * 2, "largest_mib": 196608},
     "gpuMemory 2Ti is larger than any GPU (the largest has 192Gi)"),
    ("queue_over_limit", {"queue": "q", "limit_milli": 16000, "used_milli": 500, "need_milli": 2500},
     "queue q is over its limit of 16 GPUs (0.5 GPU in use, the job needs 2.5 GPUs)"),
    ("several", {"parts": [PART, {"code": "pool_no_node", "params": {"pool": "a100-spot"}}]},
     "needs 8 GPUs, only 2 free in pool h100; pool a100-spot has no schedulable node"),
])
def test_in_english_whatever_the_active_language(code, params, english):
    with translation.override("zh-hans"):
        assert pending_reasons.english(code, params) == english
    with translation.override("en"):
        assert pending_reasons.reason_text(code, params) == english


@pytest.mark.parametrize(("code", "params"), SAMPLES)
def test_in_chinese_it_reads_in_chinese_with_the_same_figures(code, params, request):
    if code in AWAITING_TRANSLATION:
        request.applymarker(pytest.mark.xfail(strict=True, reason="translated after the merge"))
    with translation.override("zh-hans"):
        text = pending_reasons.reason_text(code, params)
    english = pending_reasons.english(code, params)
    assert text != english and CJK.search(text)
    english_figures = re.findall(r"\d+(?:\.\d+)?", english)
    assert sorted(re.findall(r"\d+(?:\.\d+)?", text)) == sorted(english_figures)


class Waiting:
    """The fields of a Job the page reads."""

    def __init__(self, code, params, stored):
        self.pending_code, self.pending_params, self.pending_reason = code, params, stored


def test_an_unknown_code_or_unreadable_figures_show_the_stored_text():
    with translation.override("zh-hans"):
        assert pending_reasons.job_reason(Waiting("a_code_from_a_newer_core", {"x": 1}, "why, in English")) == \
            "why, in English"
        assert pending_reasons.job_reason(Waiting("gpus_short", {"gpus": 8}, "needs 8 GPUs")) == "needs 8 GPUs"
        assert pending_reasons.job_reason(Waiting("", {}, "stored before codes")) == "stored before codes"
        assert pending_reasons.job_reason(Waiting("gpus_short", {"gpus": 8, "free": 2, "pool": "h100"}, "x")) == \
            "需要 8 个 GPU，资源池 h100 中只有 2 个空闲"


def test_the_jobs_page_shows_the_reason_in_the_readers_language(client, cluster, clock):
    from tests.i18n.test_i18n_pages import _busy

    waiting = _busy(cluster)[2]
    assert waiting.pending_code == "queue_non_preemptible_quota"
    client.force_login(cluster.alice)
    chinese = client.get("/jobs/?workspace=vision-lab", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    english = client.get("/jobs/?workspace=vision-lab", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    english = english.replace("&#x27;", "'")
    assert "不可抢占的工作必须在队列 vision-lab 的应得配额 16 个 GPU 之内" in chinese
    assert waiting.pending_reason in english and waiting.pending_reason not in chinese


def test_the_console_shows_the_reason_in_the_readers_language(client, cluster, clock):
    from tests.i18n.test_i18n_pages import _busy

    waiting = _busy(cluster)[2]
    client.force_login(cluster.admin)
    for path in ("/console/", f"/console/jobs/{waiting.pk}/", "/console/queues/"):
        chinese = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
        english = client.get(path, HTTP_ACCEPT_LANGUAGE="en").content.decode()
        # what the page said instead, for a failure that depends on the tests run before it in the worker
        said = re.findall(r'<p id="pending-reason">.*?</p>', chinese, re.S) or ["no pending-reason paragraph"]
        assert "不可抢占的工作必须在队列 vision-lab 的应得配额" in chinese, (path, said, Job.objects.filter(
            pk=waiting.pk).values("state", "pending_code", "pending_params").first())
        assert waiting.pending_reason in english.replace("&#x27;", "'"), path


def test_the_api_keeps_the_english_reason_and_adds_the_readers(client, cluster, clock):
    """The job page's live updates read the API: pending_reason stays the stored English (a data
    contract), pending_reason_text is in the request's language."""
    from tests.i18n.test_i18n_pages import _busy

    waiting = _busy(cluster)[2]
    client.force_login(cluster.alice)
    chinese = client.get(f"/api/v1/jobs/{waiting.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    english = client.get(f"/api/v1/jobs/{waiting.pk}/", HTTP_ACCEPT_LANGUAGE="en").json()
    assert chinese["pending_reason"] == english["pending_reason"] == waiting.pending_reason
    assert chinese["pending_reason_text"].startswith("不可抢占的工作必须在队列 vision-lab 的应得配额")
    assert english["pending_reason_text"] == waiting.pending_reason
