"""GPU model and vendor names match whatever their case, and a spec no pool can ever serve is
refused at submit and in the quote, naming the models on offer, instead of waiting forever."""

import pytest

from billing.quotes import QuoteError
from billing.services import quote_for_workspace, submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState
from scheduling.spec import SpecError

SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    gpuModel: {model}
    resources: {{gpu: 1}}
"""


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)


def test_a_lower_case_gpu_model_is_quoted_and_scheduled_on_its_pool(cluster, backend, clock, run):
    _, quote = quote_for_workspace(cluster.vision, SPEC.format(name="lower", model="a100-80gb"))
    assert {o.pool for o in quote.options} == {"a100-spot"}
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec=SPEC.format(name="lower", model="a100-80gb"))
    assert run(backend, clock).binds == 1
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED
    assert job.roles[0]["gpu_model"] == "A100-80GB"  # normalised once, when the spec was read
    assert job.replicas.get().node.pool.name == "a100-spot"


def test_a_model_no_pool_offers_is_refused_at_submit_naming_the_models_on_offer(cluster):
    with pytest.raises(SpecError) as caught:
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                          spec=SPEC.format(name="nowhere", model="B200-192GB"))
    [error] = caught.value.errors
    assert error.field == "roles[0].gpuModel"
    assert "B200-192GB" in error.message and "A100-80GB" in error.message and "H100-80GB" in error.message
    assert not Job.objects.exists()


def test_the_quote_names_the_models_on_offer_when_a_pool_lacks_the_model(cluster):
    _, quote = quote_for_workspace(cluster.vision, SPEC.format(name="q", model="H100-80GB"))
    h100_only = {o.pool for o in quote.options}
    assert h100_only == {"h100"}
    refusals = dict(line.split(": ", 1) for line in quote.unavailable)
    assert "A100-80GB" in refusals["a100-spot"] and "H100-80GB" in refusals["a100-spot"]


def test_a_pinned_pool_without_the_model_is_refused_at_submit(cluster):
    spec = SPEC.format(name="pinned", model="a100-80gb") + "    nodePool: h100\n"
    with pytest.raises(SpecError) as caught:
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    assert [e.field for e in caught.value.errors] == ["roles[0].gpuModel"]
    assert not Job.objects.exists()


def test_the_quote_refuses_a_spec_no_pool_serves(cluster):
    from billing.services import quote_spec
    from scheduling.spec import JobSpec, RoleSpec

    spec = JobSpec(name="x", type="single", roles=(RoleSpec(name="main", image="i", gpu_model="B200-192GB"),))
    with pytest.raises(QuoteError) as caught:
        quote_spec(spec)
    assert "B200-192GB" in str(caught.value) and "A100-80GB" in str(caught.value)
