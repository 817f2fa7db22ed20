"""`gpuctl notebook list|start|stop|open` against the real ASGI server: by name or id, in -w or found in the
caller's workspaces; open prints the portal URL; bob reaches none of alice's notebooks."""

from __future__ import annotations

import json

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"


@pytest.fixture
def notebook(cluster):
    from billing.services import submit_quoted_job

    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)


def test_stop_start_and_open_by_name_and_id(gpuctl, tokens, notebook, live_daphne):
    from scheduling.models import Job, JobState

    alice = tokens["alice"]
    code, out, err = gpuctl(alice, "notebook", "list")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split()[:4] == ["ID", "NAME", "WORKSPACE", "STATE"]
    assert row.split()[:4] == [str(notebook.pk), "lab", "vision-lab", "Pending"]

    code, out, err = gpuctl(alice, "notebook", "open", "lab")
    assert code == 0 and out.strip() == f"{live_daphne.url}/nb/vision-lab/lab/"
    assert "is Pending: the URL answers once it runs" in err

    code, out, err = gpuctl(alice, "notebook", "stop", "lab", "-w", "vision-lab")
    assert (code, err) == (0, "") and out.strip().endswith("-> Stopped")
    assert Job.objects.get(pk=notebook.pk).state == JobState.STOPPED
    code, out, err = gpuctl(alice, "notebook", "open", str(notebook.pk))
    assert code == 1 and "notebook lab is Stopped: gpuctl notebook start lab first" in err

    code, out, err = gpuctl(alice, "notebook", "start", str(notebook.pk), "-o", "json")
    assert code == 0 and json.loads(out)["state"] == "Pending"
    code, out, err = gpuctl(alice, "notebook", "start", "lab")
    assert code == 1 and "only a stopped one can be started" in err
    code, out, err = gpuctl(alice, "notebook", "stop", "nosuch")
    assert code == 1 and "no live notebook named nosuch" in err


def test_bob_reaches_none_of_alices_notebooks(gpuctl, tokens, notebook):
    from scheduling.models import Job, JobState

    bob = tokens["bob"]
    for action in ("stop", "start", "open"):
        code, out, err = gpuctl(bob, "notebook", action, "lab")
        assert code == 1 and "no live notebook named lab" in err and out == ""
        code, out, err = gpuctl(bob, "notebook", action, str(notebook.pk))
        assert code == 1 and f"no such notebook: {notebook.pk}" in err
    code, out, err = gpuctl(bob, "notebook", "list", "-w", "vision-lab")
    assert code == 1 and "vision-lab" in err
    code, out, err = gpuctl(bob, "notebook", "list")
    assert (code, out) == (0, "") and "no notebooks" in err
    assert Job.objects.get(pk=notebook.pk).state == JobState.PENDING
