"""Schemathesis against the live OpenAPI schema (/api/schema/): every operation, every check (as
`st run --checks all`: positive data accepted, negative data rejected, status codes, content types,
headers and bodies, problem details included, as declared), as an owner, a finance user, a staff user
and a node agent, each with its own token.

Two phases, as the CLI runs them: coverage (the schema's boundaries: each bound, null, a missing
field, an extra property, another media type) and fuzzing. The app runs in-process (WSGI) so it
sees the test's transaction. Examples are capped and derandomized: the same cases every run, a
failure reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup

pytestmark = pytest.mark.slow  # every operation, as each caller

# The repository's schemathesis.toml, as `st run` reads it.
CONFIG = SchemathesisConfig.from_path(Path(__file__).resolve().parents[2] / "schemathesis.toml")
EXAMPLES = 6  # per operation, per generation mode, per caller (the coverage phase adds its own)
AGENT_PATH = "/api/v1/agent/"
STATS: dict[str, int] = {}
BOTH_MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _all_checks():
    """Every built-in check, as `--checks all` (those that need a stateful run skip themselves)."""
    load_all_checks()
    return [check for check in CHECKS.get_all() if not isinstance(check, type)]


@pytest.fixture
def schema(cluster, settings):
    # Rate limits are their own tests' business; here they would only cut the run short.
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "api_token": "100000/60", "agent": "100000/60",
                           "device": "100000/60"}
    from billing.services import submit_quoted_job
    from scheduling.spec.examples import CLEAN_YAML, SEED_YAML

    # Something to list and show, of both tenants: pending jobs (no start, no end, no node).
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SEED_YAML, option=None)
    submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=CLEAN_YAML.replace("vision-lab", "nlp-group"), option=None)
    # and a schedule of each, with a run
    from billing.services import submit_quoted_schedule
    from scheduling import schedules

    for user, workspace in ((cluster.alice, cluster.vision), (cluster.bob, cluster.nlp)):
        schedule = submit_quoted_schedule(user=user, workspace=workspace, spec=(
            f"name: nightly\nqueue: {workspace.slug}\nroles: [{{name: main, image: busybox, resources: {{gpu: 1}}}}]\n"
            "schedule: {cron: '0 2 * * *', timeZone: Asia/Shanghai}\n"))
        schedules.trigger_schedule(user=user, schedule=schedule)

    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from portal.wsgi import application

    # As Django's test client does: a request must not close the test's connection (and transaction).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application, config=CONFIG)
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


def _validate(case, token: str, failures: list[str], seen: set[str], label: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    response = case.call(headers=headers)
    try:
        case.validate_response(response, checks=_all_checks(), headers=headers)
    except FailureGroup as group:
        for failure in group.exceptions:
            key = f"{case.operation.label} [{label}] {failure.title}: {failure.message[:300]}"
            if key not in seen:
                seen.add(key)
                failures.append(f"{key}\n    sent query={case.query} body={case.body!r:.200}\n"
                                f"    got {response.status_code} {response.text[:200]}")


def _run_coverage(operation, token: str, failures: list[str]) -> int:
    """The coverage phase's cases (each boundary of the schema, both modes); returns the calls made."""
    schema = operation.schema
    config = schema.config.generation_for(operation=operation, phase="coverage")
    seen: set[str] = set()
    calls = 0
    for case in schema.iter_coverage_cases(operation, generation_modes=list(BOTH_MODES), generation_config=config):
        calls += 1
        _validate(case, token, failures, seen, "coverage")
    return calls


def _run_mode(operation, mode, token: str, failures: list[str]) -> int:
    """Every example of one generation mode through every check; returns the calls made."""
    calls = 0
    seen: set[str] = set()

    @hsettings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
               phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        nonlocal calls
        if mode is GenerationMode.NEGATIVE and any(v == {} for v in (case.query or {}).values()):
            return  # an empty object serialises to no parameter at all: the request sent is a valid one
        calls += 1
        _validate(case, token, failures, seen, mode.value)

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
    calls = sum(_run_mode(op, mode, token, failures) for op in mine for mode in BOTH_MODES)
    # The boundaries are the same whoever calls; an owner and an agent between them reach every operation.
    if caller in ("owner", "agent"):
        calls += sum(_run_coverage(op, token, failures) for op in mine)
    STATS[caller] = calls
    print(f"schemathesis {caller}: {len(mine)} operations, {calls} calls, {len(failures)} failures")
    assert not failures, "\n".join(failures)
