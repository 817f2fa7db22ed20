"""Submitting a notebook or a service stores its kind and its requests; the real cycle places them."""

from __future__ import annotations

import pytest

from scheduling import services
from scheduling.models import Job
from scheduling.spec import parse_job_spec_obj

NOTEBOOK = "kind: notebook\nname: scratch\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"
SERVICE = ("kind: inference\nname: chat\nqueue: vision-lab\nmodel: {path: /models/llama}\n"
           "resources: {gpu: 0.5, gpuMemory: 20Gi}\nreplicas: {min: 0, max: 3}\n")
TRAINING = "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n"


@pytest.fixture
def backend(clock):
    from scheduling.backends.simulated.backend import SimulatedBackend

    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


@pytest.mark.django_db
def test_submit_stores_the_kind_and_the_cycle_places_each(cluster, backend, clock, run):
    jobs = {text: services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=text)
            for text in (NOTEBOOK, SERVICE, TRAINING)}
    notebook, service, training = (Job.objects.get(pk=jobs[t].pk) for t in (NOTEBOOK, SERVICE, TRAINING))
    assert (notebook.kind, notebook.job_type, notebook.preemptible) == ("notebook", "single", False)
    assert (service.kind, service.preemptible) == ("inference", False)
    assert training.kind == "training"
    assert notebook.roles[0]["kind"] == "notebook" and notebook.roles[0]["gpu_mem_mib"] == 10 * 1024
    assert (service.roles[0]["scale_min"], service.roles[0]["scale_max"]) == (0, 3)
    assert parse_job_spec_obj(service.spec).inference.model_path == "/models/llama"
    assert parse_job_spec_obj(notebook.spec).notebook.home_mib == 10 * 1024

    run(backend, clock)
    for job in (notebook, service, training):
        job.refresh_from_db()
        assert job.replicas.count() == 1, job.name
    assert notebook.replicas.get().slice["gpu_milli"] == 500


@pytest.mark.django_db
def test_the_same_spec_read_for_another_tenant_is_theirs(cluster):
    """A notebook of one workspace is not another's: the queue must be open to the submitter's workspace."""
    from scheduling.spec import SpecError

    with pytest.raises(SpecError) as caught:
        services.submit_job(user=cluster.bob, workspace=cluster.nlp, spec=NOTEBOOK)
    assert "queue 'vision-lab' is not open to this workspace" in str(caught.value)
    assert not Job.objects.filter(workspace=cluster.nlp).exists()
