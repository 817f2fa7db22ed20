"""Hypothesis fuzzing of the inputs most exposed to strangers: the spec parser, agent ingest, the
report filters and the budget form. Whatever comes in, the answer is a refusal the caller can
read (SpecError, a 4xx), never a crash or a 5xx, and a refusal stores nothing."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests_reliability_helpers import response_body

from scheduling.spec import parse_job_spec, parse_job_spec_obj
from scheduling.spec.examples import CLEAN_YAML, SEED_YAML
from scheduling.spec.model import SpecError

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30))
json_like = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=25)
# Specs that are nearly right: the examples' own keys with wrong values, and the examples cut up.
SPEC_KEYS = sorted({line.split(":")[0].strip(" -") for line in (SEED_YAML + CLEAN_YAML).splitlines() if ":" in line})
near_specs = st.dictionaries(st.sampled_from(SPEC_KEYS), json_like, max_size=8)
spec_lines = (SEED_YAML + CLEAN_YAML).splitlines()
cut_examples = st.lists(st.sampled_from(spec_lines), max_size=30).map("\n".join)


def _refused_only(parse, value):
    try:
        parse(value)
    except SpecError:
        pass


@FUZZ
@given(text=st.text(max_size=400) | cut_examples | near_specs.map(lambda d: yaml.safe_dump(d, allow_unicode=True))
       | json_like.map(lambda v: json.dumps(v, allow_nan=True)))
def test_spec_text_is_parsed_or_refused_with_a_spec_error(text):
    _refused_only(parse_job_spec, text)


@FUZZ
@given(data=st.binary(max_size=400) | cut_examples.map(lambda t: t.encode("utf-16")))
def test_spec_bytes_are_parsed_or_refused_with_a_spec_error(data):
    _refused_only(parse_job_spec, data)


@FUZZ
@given(obj=near_specs | st.dictionaries(st.text(max_size=12), json_like, max_size=6))
def test_spec_objects_are_parsed_or_refused_with_a_spec_error(obj):
    _refused_only(parse_job_spec_obj, obj)


@pytest.fixture
def no_rate_limits(settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "api_token": "100000/60", "agent": "100000/60",
                            "login": "100000/60"}


@pytest.fixture
def agent(cluster, client, no_rate_limits):
    from billing.metering.tokens import create_node_token
    from scheduling.models import Node

    _, raw = create_node_token(Node.objects.get(name="h100-01"))
    return lambda body: client.post("/api/v1/agent/usage", json.dumps(body, allow_nan=True),
                                    content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")


SAMPLE_KEYS = ["id", "node", "ts", "gpu_index", "gpu_uuid", "gpu_util_pct", "mem_used_mib", "interval_s", "pod_uid"]
samples = st.fixed_dictionaries({}, optional={key: json_like for key in SAMPLE_KEYS})
batches = (st.fixed_dictionaries({"samples": st.lists(samples | json_like, max_size=5)},
                                 optional={"node": st.sampled_from(["h100-01", "h100-02"]) | json_like})
           | json_like)


@FUZZ
@given(body=batches)
def test_agent_ingest_never_fails_and_stores_only_what_it_accepts(agent, body):
    from billing.models import UsageSample

    before = UsageSample.objects.count()
    response = agent(body)
    assert response.status_code < 500, response.content[:500]
    stored = UsageSample.objects.count() - before
    if response.status_code >= 400:
        assert stored == 0
    else:
        assert stored <= len(response.json()["accepted"])
        assert stored == 0 or response.json()["accepted"]


FILTER_KEYS = ["workspace", "start", "end", "queue", "gpu_model", "sharing", "job", "group", "month"]
filter_values = (st.text(max_size=40) | st.dates().map(str) | st.integers().map(str)
                 | st.sampled_from(["vision-lab", "nlp-group", "9999-12-31", "0001-01-01", "2026-02-30"]))
queries = st.dictionaries(st.sampled_from(FILTER_KEYS) | st.text(max_size=8), filter_values, max_size=6)




@pytest.fixture
def alice(cluster, client, clock, no_rate_limits):
    client.force_login(cluster.alice)
    return client


@FUZZ
@given(query=queries, path=st.sampled_from(["/reports/", "/reports/export.csv"]))
def test_report_filters_never_fail(alice, query, path):
    response = alice.get(path, query)
    response_body(response)
    assert response.status_code < 500


@FUZZ
@given(amount=st.text(max_size=30) | st.decimals(allow_nan=True).map(str) | st.integers().map(str),
       currency=st.text(max_size=6) | st.sampled_from(["USD", "eur", "JPY", "BHD", "XXX", ""]),
       block=st.sampled_from(["", "on"]))
def test_budget_form_never_fails_and_stores_nothing_when_refused(alice, amount, currency, block):
    from billing.models import Budget

    def budget():
        return list(Budget.objects.filter(workspace__slug="vision-lab").values("amount", "currency", "block_at_limit"))

    before = budget()
    response = alice.post("/reports/budgets/vision-lab/", {"amount": amount, "currency": currency,
                                                           "block_at_limit": block})
    assert response.status_code < 500
    if response.status_code >= 400:
        assert budget() == before
    for row in budget():
        assert row["amount"] > 0
