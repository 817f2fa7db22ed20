"""GPU advice for inference, for tenants (/advice/inference/ and GET /api/v1/advice/inference/): the memory a
model needs (weights + KV cache + runtime, worked out by hand), the smallest fraction, MIG profile or
whole-GPU count of each pool the caller's workspaces can use, and bad queries refused with a 400."""

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from tests.factories import MembershipFactory, UserFactory, WorkspaceFactory

GIB = Decimal(2**30)
SEVEN_B = "params_b=7&precision=fp16&context=4096&concurrency=1"


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_7b_fp16_model_at_4k_context(client, cluster):
    """Weights 7e9 x 2 bytes = 13.04 GiB; the rule of thumb's shape for 7B is 33 layers x 4224
    (12 x layers x hidden^2 = P, hidden = 128 x layers), so the KV cache of one 4096-token sequence is
    2 x 33 x 4224 x 2 bytes x 4096 = 2.13 GiB; plus 1 GiB runtime: 16.17, rounded up to 16.2 GiB."""
    client.force_login(cluster.alice)
    response = client.get(f"/advice/inference/?{SEVEN_B}")
    assert response.status_code == 200
    advice = response.context["advice"]
    assert advice.weights_gib == Decimal(7 * 10**9 * 2) / GIB                # 13.04
    assert (advice.layers, advice.hidden) == (33, 4224)
    assert advice.kv_cache_gib == Decimal(2 * 33 * 4224 * 2 * 4096) / GIB   # 2.127
    assert advice.runtime_gib == 1
    assert advice.need.gib == Decimal("16.2") and advice.need.mib == 16589
    html = response.content.decode()
    assert '<span id="need-gib">16.2</span>' in html and "13.04 GiB" in html and "2.13 GiB" in html

    fits = {p.pool: p for p in advice.pools}
    assert set(fits) == {"h100", "h100-mig", "a100-spot", "l40s-shared", "rtx4090", "mi300x"}
    # 16589 MiB of an 81920-MiB card is 0.2025: 0.21 in steps of 0.01
    assert (fits["h100"].smallest, fits["h100"].fraction_gpu, fits["h100"].whole_gpus) == ("fraction",
                                                                                           Decimal("0.21"), 1)
    assert fits["a100-spot"].fraction_gpu == Decimal("0.21")
    assert (fits["rtx4090"].fraction_gpu, fits["mi300x"].fraction_gpu) == (Decimal("0.68"), Decimal("0.09"))
    # the MIG pool's layout is 3g.40gb, 2g.20gb, 1g.10gb: 20 GiB is the smallest that holds 16.2
    assert (fits["h100-mig"].smallest, fits["h100-mig"].mig_profile, fits["h100-mig"].fraction_gpu) == (
        "mig", "2g.20gb", None)
    assert (fits["l40s-shared"].smallest, fits["l40s-shared"].timeslice) == ("timeslice", True)
    assert "gpuMemory: 17Gi" not in html and "{gpu: 0.21, gpuMemory: 16589Mi}" in html


def test_a_known_shape_and_more_sequences(client, cluster):
    """Llama-2 7B is 32 layers x 4096: its KV cache is 2 GiB a 4096-token sequence, 16 GiB for eight."""
    client.force_login(cluster.alice)
    one = client.get(f"/advice/inference/?{SEVEN_B}&layers=32&hidden=4096").context["advice"]
    assert (one.kv_cache_gib, one.need.gib, one.shape_given) == (2, Decimal("16.1"), True)
    eight = client.get("/advice/inference/?params_b=7&precision=fp16&context=4096&concurrency=8&layers=32"
                       "&hidden=4096").context["advice"]
    assert (eight.kv_cache_gib, eight.need.gib) == (16, Decimal("30.1"))   # 13.04 + 16 + 1
    int4 = client.get("/advice/inference/?params_b=7&precision=int4&context=4096&concurrency=1&layers=32"
                      "&hidden=4096").context["advice"]
    assert int4.weights_gib == Decimal(7 * 10**9) / 2 / GIB and int4.kv_cache_gib == 2   # the cache stays fp16
    fp8 = client.get("/advice/inference/?params_b=7&precision=fp8&context=4096&concurrency=1").context["advice"]
    assert fp8.weights_gib == Decimal(7 * 10**9) / GIB


def test_a_70b_model_needs_whole_gpus_and_fits_no_small_card(client, cluster):
    client.force_login(cluster.alice)
    advice = client.get("/advice/inference/?params_b=70&precision=fp16&context=4096&concurrency=1").context["advice"]
    assert advice.need.gib > 80  # 130.4 GiB of weights alone
    fits = {p.pool: p for p in advice.pools}
    assert (fits["h100"].smallest, fits["h100"].fraction_gpu, fits["h100"].whole_gpus) == ("exclusive", None, 2)
    assert (fits["h100-mig"].smallest, fits["h100-mig"].mig_profile) == ("none", None)
    assert (fits["l40s-shared"].smallest, fits["l40s-shared"].timeslice) == ("none", False)
    # 141.3 GiB: six 24-GiB cards, and a node of that pool has two
    assert (fits["rtx4090"].smallest, fits["rtx4090"].whole_gpus, fits["rtx4090"].fits_one_node) == ("none", 6, False)
    assert fits["mi300x"].smallest == "fraction"   # 192 GiB cards


def test_only_pools_the_callers_workspaces_can_use(client, cluster):
    for user in (cluster.alice, cluster.bob):   # pools are shared by every workspace with a queue
        client.force_login(user)
        assert len(client.get(f"/advice/inference/?{SEVEN_B}").context["advice"].pools) == 6
    lonely = UserFactory(username="lonely")
    MembershipFactory(user=lonely, workspace=WorkspaceFactory(slug="no-queues", name="No Queues"))
    nobody = UserFactory(username="nobody")
    for user in (lonely, nobody):
        client.force_login(user)
        response = client.get(f"/advice/inference/?{SEVEN_B}")
        assert response.status_code == 200 and response.context["advice"].pools == ()
        html = response.content.decode()
        assert 'id="no-pools"' in html and "h100" not in html and "a100-spot" not in html
        assert api_for(user).get(f"/api/v1/advice/inference/?{SEVEN_B}").json()["pools"] == []


def test_the_form_alone_until_asked(client, cluster):
    client.force_login(cluster.alice)
    response = client.get("/advice/inference/")
    assert response.status_code == 200 and response.context["advice"] is None
    html = response.content.decode()
    assert 'name="params_b"' in html and 'value="4096"' in html and 'id="advice-pools"' not in html
    assert 'id="nav-advice"' in html and 'aria-current="page"' in html
    client.logout()
    assert client.get("/advice/inference/")["Location"].startswith("/login/")


@pytest.mark.parametrize(("query", "field"), [
    ("params_b=abc&precision=fp16&context=4096&concurrency=1", "params_b"),
    ("params_b=-7&precision=fp16&context=4096&concurrency=1", "params_b"),
    ("params_b=1e9&precision=fp16&context=4096&concurrency=1", "params_b"),
    ("params_b=NaN&precision=fp16&context=4096&concurrency=1", "params_b"),
    ("params_b=7&precision=fp64&context=4096&concurrency=1", "precision"),
    ("params_b=7&precision=fp16&context=0&concurrency=1", "context"),
    ("params_b=7&precision=fp16&context=4k&concurrency=1", "context"),
    ("params_b=7&precision=fp16&context=99999999999&concurrency=1", "context"),
    ("params_b=7&precision=fp16&context=4096&concurrency=-1", "concurrency"),
    ("params_b=7&precision=fp16&context=4096", "concurrency"),
    ("params_b=7&precision=fp16&context=4096&concurrency=1&layers=0", "layers"),
    ("params_b=7&precision=fp16&context=4096&concurrency=1&hidden=" + "9" * 5000, "hidden"),
])
def test_a_bad_query_is_a_400_beside_its_field(client, cluster, query, field):
    client.force_login(cluster.alice)
    response = client.get(f"/advice/inference/?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert f'class="errors field-errors" data-field="{field}"' in html and 'id="advice-need"' not in html
    assert '<header class="topbar">' in html   # the site's own page, styled

    problem = api_for(cluster.alice).get(f"/api/v1/advice/inference/?{query}")
    if field == "concurrency" and "concurrency" not in query:
        assert problem.status_code == 200   # the API's concurrency defaults to 1
        return
    assert problem.status_code == 400 and problem["Content-Type"] == "application/problem+json"
    assert field in {e["field"] for e in problem.json()["errors"]}


def test_the_api_gives_the_same_figures(cluster):
    body = api_for(cluster.alice).get(f"/api/v1/advice/inference/?{SEVEN_B}").json()
    assert body["memory"] == {"total_gib": "16.2", "total_mib": 16589, "weights_gib": "13.04",
                              "kv_cache_gib": "2.13", "runtime_gib": "1.00"}
    assert (body["layers"], body["hidden"], body["shape"]) == (33, 4224, "rule of thumb")
    pools = {p["pool"]: p for p in body["pools"]}
    assert pools["h100"]["fraction_gpu"] == "0.21" and pools["h100-mig"]["mig_profile"] == "2g.20gb"
    assert pools["h100"]["spec"] == "sharing: fraction\nresources: {gpu: 0.21, gpuMemory: 16589Mi}"
    assert APIClient().get(f"/api/v1/advice/inference/?{SEVEN_B}").status_code in (401, 403)


def test_the_page_reads_in_chinese(client, cluster):
    from tests.i18n.test_i18n_pages import english_words

    client.force_login(cluster.alice)
    html = client.get(f"/advice/inference/?{SEVEN_B}", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    main = html[html.index("<main>"):html.index("</main>")]   # the header is the site's (tests/i18n)
    assert "推理 GPU 建议" in main and "需要" in main
    # units, acronyms and the precisions' names stay as they are
    assert set(english_words(main)) <= {"GiB", "KV", "CUDA", "fp16", "bf16", "fp8", "int8", "int4"}, english_words(main)
    bad = client.get("/advice/inference/?params_b=x&precision=fp16&context=1&concurrency=1",
                     HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "请输入大于 0" in bad
