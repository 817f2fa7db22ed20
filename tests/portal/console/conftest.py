"""Fixtures for the console tests: a clock at peak hours, the simulated backend, and a cycle
runner that executes the after-commit work as a real commit would."""

import pytest
from tests_job_specs import job_spec


@pytest.fixture
def backend(clock):
    from scheduling.backends.simulated.backend import SimulatedBackend

    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)  # jobs run their full hour


@pytest.fixture
def operator(cluster):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="admin")


@pytest.fixture
def admin_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def submit():
    from billing.services import submit_quoted_job

    def do(tenants, name, *, workspace="vision", **kwargs):
        user = tenants.alice if workspace == "vision" else tenants.bob
        ws = tenants.vision if workspace == "vision" else tenants.nlp
        return submit_quoted_job(user=user, workspace=ws, spec=job_spec(name, **kwargs))

    return do
