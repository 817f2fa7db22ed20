"""Schemathesis against the live OpenAPI schema (/api/schema/): every operation, every check, as
an owner, a finance user, a staff user and a node agent, each with its own token.

The app runs in-process (WSGI) so it sees the test's transaction. Examples are capped and
derandomized: the same cases every run, a failure reproduces."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import positive_data_acceptance

EXAMPLES = 10  # per operation, per generation mode, per caller
AGENT_PATH = "/api/v1/agent/"
STATS: dict[str, int] = {}
# Their bodies carry a task spec or agent samples, or their query a workspace and a date range, whose
# meaning no JSON schema can state (a pool that exists, GPUs that fit, a workspace of the caller's, an
# end after the start): a schema-valid request may rightly be refused with a documented 4xx.
SEMANTIC_BODIES = {"/api/v1/jobs/", "/api/v1/quotes/", "/api/v1/specs/image-form/", "/api/v1/agent/usage",
                   "/api/v1/agent/heartbeat", "/api/v1/costs/", "/api/v1/specs/image-form/values/",
                   "/api/v1/agent/join"}  # a node name the cluster would accept


@pytest.fixture
def schema(cluster, settings):
    # Rate limits are their own tests' business; here they would only cut the run short.
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "api_token": "100000/60", "agent": "100000/60"}
    from billing.services import submit_quoted_job
    from scheduling.spec.examples import CLEAN_YAML, SEED_YAML

    # Something to list and show, of both tenants: pending jobs (no start, no end, no node).
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SEED_YAML, option=None)
    submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=CLEAN_YAML.replace("vision-lab", "nlp-group"), option=None)

    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from portal.wsgi import application

    # As Django's test client does: a request must not close the test's connection (and transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _tokens(cluster):
    from billing.metering.tokens import create_node_token
    from portal.services import create_api_token
    from scheduling.models import Node

    return {
        "owner": create_api_token(cluster.alice, "schemathesis")[1],
        "finance": create_api_token(cluster.finance, "schemathesis")[1],
        "staff": create_api_token(cluster.admin, "schemathesis")[1],
        "agent": create_node_token(Node.objects.get(name="h100-01"))[1],
    }


def _run_mode(operation, mode, token: str, failures: list[str]) -> int:
    """Every example of one generation mode through every check; returns the calls made."""
    calls = 0
    seen: set[str] = set()
    # Their meaning is beyond a JSON schema, so a schema-valid body may get a documented 400.
    excluded = [positive_data_acceptance] if operation.path in SEMANTIC_BODIES else []

    @hsettings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
               phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        nonlocal calls
        if mode is GenerationMode.NEGATIVE and any(v == {} for v in (case.query or {}).values()):
            return  # an empty object serialises to no parameter at all: the request sent is a valid one
        calls += 1
        try:
            case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, excluded_checks=excluded)
        except FailureGroup as group:
            for failure in group.exceptions:
                key = f"{operation.label} [{mode.value}] {failure.title}: {failure.message[:300]}"
                if key not in seen:
                    seen.add(key)
                    failures.append(key)

    try:
        run()
    except Unsatisfiable:
        pass  # no example of this mode exists (e.g. nothing to negate in an operation without parameters)
    return calls


@pytest.mark.parametrize("caller", ["owner", "finance", "staff", "agent"])
def test_every_operation_conforms_to_the_schema(schema, cluster, caller):
    token = _tokens(cluster)[caller]
    operations = [result.ok() for result in schema.get_all_operations()]
    # Node tokens open only the agent endpoints, personal tokens everything else.
    mine = [op for op in operations if op.path.startswith(AGENT_PATH) == (caller == "agent")]
    assert mine, f"no operation for {caller}"
    failures: list[str] = []
    calls = sum(_run_mode(op, mode, token, failures) for op in mine
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE))
    STATS[caller] = calls
    print(f"schemathesis {caller}: {len(mine)} operations, {calls} calls, {len(failures)} failures")
    assert not failures, "\n".join(failures)
