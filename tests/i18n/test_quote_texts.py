"""A quote's trade-offs and the pools' refusals in the reader's language (billing.quote_texts, the one
catalogue): every code billing.quotes gives has a text with the same figures; the quote words none
itself (its Note.text is the catalogue's English whatever the active language), in Chinese a
translation; an unknown code or figures of another shape fall back to the English; the quote API keeps
its English fields and adds *_text in the request's language."""

import re
from dataclasses import replace
from decimal import Decimal

import pytest
from django.utils import translation
from rest_framework.test import APIClient

from billing import quote_texts
from billing.quotes import (
    PoolOffer,
    QuoteError,
    budget_note,
    quota_note,
    quote,
    with_expected_loss,
    with_expected_starts,
    with_preemptible_variants,
)
from scheduling.spec import parse_job_spec
from tests.billing.quotes.test_quotes_helpers import PEAK, SEED_YAML, UTC_ZONE, demo_pool_offers
from tests.world import world_rates

CJK = re.compile(r"[\u4e00-\u9fff]")


def job(*roles: str, head: str = "") -> str:
    return "name: q\n" + head + "roles:\n" + "".join(roles)


def role(name: str, resources: str, extra: str = "") -> str:
    return f"  - name: {name}\n    image: busybox\n    resources: {resources}\n{extra}"


QUARTER = job(role("main", "{gpu: 0.25, gpuMemory: 10Gi}"))
TWO_SHARED = job(role("master", "{gpu: 0.25, gpuMemory: 10Gi}"), role("worker", "{gpu: 0.5, gpuMemory: 20Gi}"),
                 head="type: pytorch\n")
# one fraction fits only a MIG 3g.40gb instance (39.25 GiB usable: 39Gi fits, 40Gi would not), the other only a
# time-slice slot (50Gi is more than a profile)
SPLIT = job(role("master", "{gpu: 0.3, gpuMemory: 39Gi}"), role("worker", "{gpu: 0.25, gpuMemory: 50Gi}"),
            head="type: pytorch\n")
MIG_AND_SLOTS = PoolOffer(name="mixed", vendor="nvidia", gpu_model="H100-80GB", gpu_memory_mib=80 * 1024,
                          gpus_per_node=8, sharing_modes=frozenset({"mig", "timeslice"}),
                          mig_profiles=frozenset({"3g.40gb", "1g.10gb"}), timeslice_replicas=4)


def notes_of(spec_text: str, pools=None, rates=None, *, queued=False, evictions=None, held=None):
    """Every trade-off and refusal one quote (or its QuoteError) gives, as Notes; `queued`: no node has
    room for any option now; `evictions`: its queue's (evictions, GPU-hours run) of late; `held`: what holds
    every "now" option (a quota reason's code, or "budget"), the first one offered as preemptible too."""
    spec = parse_job_spec(spec_text)
    try:
        result = quote(spec, pools or demo_pool_offers(), rates or world_rates(), now=PEAK, tz=UTC_ZONE)
    except QuoteError as error:
        return list(error.refusals)
    if queued:
        result = with_expected_starts(result, {o.id: None for o in result.options})
    if evictions:
        result = with_expected_loss(result, spec, *evictions)
    if held:
        figures = {"queue": "vision-lab", "limit_milli": 16000, "deserved_milli": 16000, "used_milli": 15000,
                   "need_milli": 2000}
        note = budget_note() if held == "budget" else quota_note(held, figures)
        now_ids = [o.id for o in result.options if o.when == "now"]
        result = with_expected_starts(result, dict.fromkeys(now_ids), dict.fromkeys(now_ids, note))
        if held == "queue_non_preemptible_quota":
            result = with_preemptible_variants(result, {now_ids[0]: "vision-lab"})
    return [n for o in result.options for n in o.tradeoff_notes] + list(result.refusals)


RACKED = PoolOffer(name="racked", vendor="nvidia", gpu_model="H100-80GB", gpu_memory_mib=80 * 1024, gpus_per_node=8,
                   topology=(("example.com/block", 128), ("topology.kubernetes.io/rack", 32)))
GANG = job(role("main", "{gpu: 8}", "    replicas: {min: 2, max: 2}\n"))
EMPTY_POOL = PoolOffer(name="b200", vendor="nvidia", gpu_model="B200-180GB", gpu_memory_mib=184320, gpus_per_node=0,
                       free_milli_now=0, total_gpus=0)


def every_note():
    no_rtx = replace(world_rates(), gpu={k: v for k, v in world_rates().gpu.items() if k[1] != "RTX-4090-24GB"})
    no_windows = replace(world_rates(), offpeak_windows=())
    return [
        *notes_of(SEED_YAML),  # ReduceCost, off-peak waits, spot, pools too small, roles not guaranteed
        *notes_of(SEED_YAML, demo_pool_offers(with_totals=False)),  # AMD
        *notes_of(QUARTER),  # shared, time-sliced, pays for more
        *notes_of(TWO_SHARED),  # a role's name before its trade-offs
        *notes_of(QUARTER.replace("name: q\n", "name: q\npreemptible: true\n"), demo_pool_offers(h100=0)),
        *notes_of(QUARTER, queued=True),  # no node has room now
        # the queue's quota holds "now": non-preemptible work over its deserved quota (and the preemptible
        # variant offered), any work at the queue's limit; the workspace's blocking budget is spent
        *notes_of(QUARTER, held="queue_non_preemptible_quota"),
        *notes_of(QUARTER, held="queue_over_limit"),
        *notes_of(QUARTER, held="budget"),
        *notes_of(SPLIT, [MIG_AND_SLOTS]),  # no one sharing mode
        *notes_of(QUARTER, rates=no_rtx),  # not priced in this table's currency
        *notes_of(SEED_YAML, rates=no_windows),  # ReduceCost without an off-peak window
        *notes_of(job(role("main", "{gpu: 1}", "    nodePool: h100\n"))),  # pinned elsewhere
        *notes_of(job(role("main", "{gpu: 1}", "    gpuModel: B200-192GB\n"))),  # no pool at all
        *notes_of(job(role("main", "{gpu: 1, mig: 7g.80gb}", "    sharing: mig\n"))),  # no 7g instance
        *notes_of(QUARTER, [*demo_pool_offers(), EMPTY_POOL]),  # a pool no node has joined yet
        *notes_of(GANG, [RACKED]),  # a gang within one rack
        *notes_of(GANG + "topology: {preferred: rack}\n", [RACKED]),  # the spec's own, preferred
        *notes_of(GANG + "topology: {required: rack}\n", [RACKED, replace(RACKED, name="flat", topology=())]),
        *notes_of(QUARTER + 'array: {indices: "0-9", parallelism: 2}\n'),  # an array: totals for every index
        *notes_of(QUARTER + "completeWithin: 12h\n"),  # a deadline: the "by the deadline" option
        # the expected loss at the queue's eviction rate, without checkpoints and with them
        *notes_of(SEED_YAML, evictions=(5, Decimal(10))),
        *notes_of(job(role("main", "{gpu: 1}"), head="preemptible: true\ncheckpoint: {path: /ckpt, volume: runs}\n"),
                  evictions=(5, Decimal(10))),
    ]


NOTES = every_note()


def render(note):
    table = quote_texts.TRADEOFFS if note.code in quote_texts.TRADEOFFS else quote_texts.REFUSALS
    assert note.code in table, note.code
    if table is quote_texts.TRADEOFFS:
        return quote_texts.tradeoff_text(note.code, note.params, "?")
    return quote_texts.refusal_text(note.code, note.params, "?")


def test_every_code_is_reached_and_has_a_text():
    assert {n.code for n in NOTES} == set(quote_texts.TRADEOFFS) | set(quote_texts.REFUSALS)
    assert set(quote_texts.TAGS) == set(quote_texts.TRADEOFFS)


@pytest.mark.parametrize("note", NOTES, ids=lambda n: n.code)
def test_a_notes_text_is_the_catalogues_english_whatever_the_language(note):
    with translation.override("en"):
        english = render(note)
    with translation.override("zh-hans"):
        assert note.text == english == quote_texts.english_note(note.code, note.params)
        assert not CJK.search(note.text)


def test_the_quote_module_words_nothing_itself():
    from billing import quotes

    assert quotes._code_and_figures("spot", {}) == "spot {}"  # with no catalogue installed
    assert quotes.Note("spot", {}).text == "spot capacity: can be reclaimed at any time"
    assert quotes.Note("pays_for_more", {"role": "worker", "share": "0.5", "asked": "0.25"}).text == \
        "role 'worker': pays for 0.5 GPU per replica, more than the 0.25 GPU asked"


@pytest.mark.parametrize("note", NOTES, ids=lambda n: n.code)
def test_in_chinese_it_reads_in_chinese_with_the_same_figures(note):
    with translation.override("zh-hans"):
        text = render(note)
    assert text != note.text and CJK.search(text), text
    figures = sorted(re.findall(r"\d+(?:\.\d+)?", note.text))
    assert sorted(re.findall(r"\d+(?:\.\d+)?", text)) == figures, text


def test_the_short_names_are_the_apis_tags_in_english():
    with translation.override("zh-hans"):
        for note in NOTES:
            if note.code in quote_texts.TAGS:
                assert note.tag == quote_texts.english_tag(note.code) == quote_texts.TAGS[note.code], note.code


def test_an_unknown_code_or_unreadable_figures_or_no_codes_keep_the_english():
    with translation.override("zh-hans"):
        assert quote_texts.tradeoff_text("from_a_newer_quote", {}, "as written") == "as written"
        assert quote_texts.tradeoff_text("may_wait_for_capacity", {"pool": "h100"}, "as written") == "as written"
        assert quote_texts.refusal_text("pool_too_small", {}, "as written") == "as written"
        stored = {"tradeoffs": ["spot capacity: can be reclaimed at any time"], "tradeoff_tags": ["reclaimable"]}
        assert quote_texts.option_tradeoffs(stored) == stored["tradeoffs"]  # a quote kept before codes
        assert quote_texts.option_tags(stored) == ["reclaimable"]
        coded = {**stored, "tradeoff_codes": [{"code": "spot", "params": {}}]}
        assert quote_texts.option_tradeoffs(coded) == ["竞价资源：随时可能被回收"]
        assert quote_texts.option_tags(coded) == ["可被回收"]


# --------------------------------------------------------------------------- the quote API

# 24 GPUs on h100, which has 16
TOO_BIG = job(role("master", "{gpu: 8}", "    nodePool: h100\n"),
              role("worker", "{gpu: 8}", "    nodePool: h100\n    replicas: 2\n"), head="type: pytorch\n")


@pytest.fixture
def api(cluster, clock):
    client = APIClient()
    client.force_authenticate(cluster.alice)
    return client


def test_the_api_keeps_the_english_and_adds_the_requests_language(api):
    body = {"workspace": "vision-lab", "spec": QUARTER}
    english = api.post("/api/v1/quotes/", body, format="json", HTTP_ACCEPT_LANGUAGE="en").json()
    chinese = api.post("/api/v1/quotes/", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    for en, zh in zip(english["options"], chinese["options"], strict=True):
        assert en["tradeoffs"] == zh["tradeoffs"] == en["tradeoffs_text"]  # English fields stay English
        assert en["tradeoff_codes"] == zh["tradeoff_codes"] and len(zh["tradeoff_codes"]) == len(zh["tradeoffs"])
        assert en["tradeoff_tags"] == zh["tradeoff_tags"] == en["tradeoff_tags_text"]
        assert all(CJK.search(t) for t in zh["tradeoffs_text"] + zh["tradeoff_tags_text"]), zh
    assert english["unavailable"] == chinese["unavailable"] == english["unavailable_text"]
    assert [c["params"]["pool"] for c in chinese["unavailable_codes"]] == [
        line.split(":")[0] for line in chinese["unavailable"]]
    assert chinese["unavailable_text"] and all(CJK.search(t) for t in chinese["unavailable_text"])


def test_a_refused_quote_says_why_in_the_requests_language(api):
    body = {"workspace": "vision-lab", "spec": TOO_BIG}
    english = api.post("/api/v1/quotes/", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    chinese = api.post("/api/v1/quotes/", body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert english.status_code == chinese.status_code == 422
    assert english.json()["detail"].startswith("spec: no pool can run this job: ")
    detail = chinese.json()["detail"]
    assert "没有资源池能运行此作业" in detail and "h100: 该资源池共有 16 个 GPU" in detail, detail
    assert chinese.json()["errors"][0]["field"] == "spec"


# --------------------------------------------------------------------------- the pages


def test_the_console_advice_says_its_trade_offs_and_refusals_in_the_readers_language(client, cluster, clock):
    client.force_login(cluster.admin)
    path = "/console/advice/?params_b=7&task=training&precision=fp16"
    english = client.get(path, HTTP_ACCEPT_LANGUAGE="en").content.decode().replace("&#x27;", "'")
    chinese = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode().replace("&#x27;", "'")
    assert "spot capacity: can be reclaimed at any time" in english
    assert "h100-mig: role 'main': nodePool 'h100-mig' does not offer sharing 'exclusive' (offered: mig); its mig " \
           "(1g.10gb, 2g.20gb, 3g.40gb) cannot guarantee role 'main' 2 whole GPUs per replica" in english
    assert "竞价资源：随时可能被回收" in chinese and "spot capacity" not in chinese
    assert "h100-mig: 角色 'main'：资源池 'h100-mig' 不提供共享方式 'exclusive'（提供：mig）；它提供的 mig " \
           "(1g.10gb, 2g.20gb, 3g.40gb) 无法保证角色 'main' 每个副本获得 2 个整块 GPU" in chinese


def test_the_submit_page_renders_its_quote_in_the_readers_language(client, cluster, clock):
    client.force_login(cluster.alice)
    english = client.get("/submit/?example=clean", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    chinese = client.get("/submit/?example=clean", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    english, chinese = (page.replace("&#x27;", "'") for page in (english, chinese))
    assert "Every option: spot capacity: can be reclaimed at any time; preemptible: can be evicted" in english
    assert "所有选项： 竞价资源：随时可能被回收；可被抢占：" in chinese
    assert '<span class="chip">shared GPU</span>' in english and '<span class="chip">共享 GPU</span>' in chinese
    assert "h100: role 'worker' is pinned to nodePool 'a100-spot'" in english
    assert "h100: 角色 'worker' 被固定到资源池 'a100-spot'" in chinese
    assert 'data-not-offered-text="不提供（%(n)s）"' in chinese and 'data-now-text="现在"' in chinese
    total = re.search(r'class="num total">([^<]*)<', chinese).group(1)
    assert re.fullmatch(r"\$\d+\.\d\d", total), total  # vision-lab is billed in USD


def test_every_pool_problem_has_a_text():
    figures = {"pool": "b200", "currencies": ["USD", "CNY"], "vendor": "nvidia", "gpu_model": "B200-180GB"}
    assert quote_texts.pool_problem_text("pool_has_no_nodes", figures, "?") == "the pool has no nodes yet"
    assert quote_texts.pool_problem_text("pool_not_priced", figures, "?") == (
        "no rate for nvidia B200-180GB in the USD, CNY price table")
    assert quote_texts.pool_problem_text("pool_not_priced", {}, "?") == "?"
