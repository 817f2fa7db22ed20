"""A notebook's home is a workspace volume: made at its first submit (home-<name>), sized by its home, counted
in the storage quota (a home past it refuses the notebook at home.size, nothing stored), reused and grown by
the next notebook of that name, mounted from its folder on the simulated cluster (its files outlive the
notebook), billed by use, kept when the notebook is deleted and undeletable while it lives; another
workspace's notebook of the same name has a home of its own. Old homes move into volumes by migration."""

from __future__ import annotations

import importlib
import time

import httpx
import pytest
from django.apps import apps
from rest_framework.test import APIClient

from billing.metering.storage import record_kubelet_volumes, sample_storage
from billing.models import StorageSample
from billing.services import submit_quoted_job
from portal.backup.trees import FILE_TREES
from portal.services import create_api_token
from scheduling import services, storage
from scheduling.backends.kubernetes.claims import claim_index
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.errors import Conflict
from scheduling.models import Job, JobState, Volume
from scheduling.notebooks import endpoint_of
from scheduling.spec import SpecError

NOTEBOOK = "kind: notebook\nname: scratch\nqueue: {queue}\nnodePool: h100\nresources: {{gpu: 0.5, gpuMemory: 10Gi}}\n"
VOLUMES = "/api/v1/workspaces/{slug}/volumes/"


def notebook(queue: str = "vision-lab", home: str = "") -> str:
    return NOTEBOOK.format(queue=queue) + (f"home: {{size: {home}}}\n" if home else "")


def api_with(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(user, 'submit token', scope='submit')[1]}")
    return api


@pytest.mark.django_db
def test_the_home_is_a_volume_counted_reused_grown_and_kept(cluster):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="20Gi"))
    home = Volume.objects.get(workspace=cluster.vision)
    assert (home.name, home.home_of, home.size_gib) == ("home-scratch", "scratch", 20)
    assert storage.used_gib(cluster.vision) == 20

    services.stop_workload(cluster.alice, job)  # a stopped notebook still owns its home
    with pytest.raises(Conflict, match=f"mounted by live jobs: {job.pk} \\(scratch, Stopped\\)"):
        storage.delete_volume(cluster.alice, cluster.vision, "home-scratch")
    services.delete_notebook(cluster.alice, job)
    assert Volume.objects.filter(pk=home.pk).exists()  # the files are kept

    again = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook())  # 10Gi asked
    assert Volume.objects.get(workspace=cluster.vision).pk == home.pk
    assert Volume.objects.get(pk=home.pk).size_gib == 20  # a volume never shrinks
    services.delete_notebook(cluster.alice, again)
    third = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="30Gi"))
    assert Volume.objects.get(pk=home.pk).size_gib == 30 and Volume.objects.count() == 1
    services.delete_notebook(cluster.alice, third)
    storage.delete_volume(cluster.alice, cluster.vision, "home-scratch")  # no live notebook: allowed
    assert not Volume.objects.exists()


@pytest.mark.django_db
def test_a_home_past_the_storage_quota_refuses_the_notebook_at_home_size(cluster):
    storage.set_storage_quota(cluster.vision, 25)
    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=10)
    with pytest.raises(SpecError) as refused:
        services.read_spec(cluster.vision, notebook(home="20Gi"))  # the quote says so already
    (issue,) = refused.value.errors
    assert issue.field == "home.size" and "storage quota is 25 GiB: 10 GiB are in other volumes" in issue.message
    answer = api_with(cluster.alice).post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": notebook(home="20Gi")},
                                        format="json")
    assert answer.status_code == 400, answer.content
    assert [(e["field"], "storage quota is 25 GiB" in e["message"]) for e in answer.json()["errors"]] == [
        ("home.size", True)]
    assert not Job.objects.exists() and list(Volume.objects.values_list("name", flat=True)) == ["data"]

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="15Gi"))  # fits
    assert storage.used_gib(cluster.vision) == 25
    services.delete_notebook(cluster.alice, job)
    with pytest.raises(SpecError, match="storage quota"):  # growing the home passes the quota too
        services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="16Gi"))
    assert Volume.objects.get(home_of="scratch").size_gib == 15


@pytest.mark.django_db
def test_an_ordinary_volume_of_the_home_name_is_never_taken_for_a_home(cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="home-scratch", size_gib=1)
    with pytest.raises(SpecError, match="'home-scratch' that is not this notebook's home"):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook())
    assert not Job.objects.exists() and Volume.objects.get().home_of == ""


def running(run, backend, clock, job: Job) -> Job:
    deadline = time.monotonic() + 20
    while job.state != JobState.RUNNING and time.monotonic() < deadline:
        run(backend, clock)
        job.refresh_from_db()
        time.sleep(0.05)
    assert job.state == JobState.RUNNING
    return job


@pytest.mark.django_db
def test_files_in_the_home_outlive_the_notebook_are_billed_and_stay_in_their_workspace(cluster, clock, run):
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    first = running(run, backend, clock, submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                                           spec=notebook()))
    endpoint = endpoint_of(first, backend)
    auth = {"Authorization": f"token {endpoint.token}"}
    assert httpx.put(endpoint.url + "api/contents/notes.txt", json={"content": "keep me"}, headers=auth).is_success
    folder = storage.volume_dir("vision-lab", "home-scratch")
    assert (folder / "notes.txt").read_text() == "keep me"  # the home is the volume's folder
    assert storage.volume_files(cluster.vision, "home-scratch") == [("/notes.txt", 7)]
    assert [tree.name for tree in FILE_TREES if folder.is_relative_to(tree.path)] == ["volumes"]  # backed up once

    other = running(run, backend, clock, submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                                                           spec=notebook("nlp-group")))
    elsewhere = endpoint_of(other, backend)
    listed = httpx.get(elsewhere.url + "api/contents", headers={"Authorization": f"token {elsewhere.token}"})
    assert "notes.txt" not in listed.text  # the same notebook name, another workspace: another home
    assert storage.volume_dir("nlp-group", "home-scratch") != folder

    assert sample_storage(now=clock.now) >= 2
    used = dict(StorageSample.objects.filter(name="home-scratch").values_list("workspace__slug", "used_bytes"))
    assert used == {"vision-lab": 7, "nlp-group": 0}

    services.delete_notebook(cluster.alice, first, backend=backend)  # its home kept
    run(backend, clock)
    second = running(run, backend, clock, submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                                            spec=notebook()))
    endpoint = endpoint_of(second, backend)
    note = httpx.get(endpoint.url + "api/contents/notes.txt", headers={"Authorization": f"token {endpoint.token}"})
    assert note.json()["content"] == "keep me"


@pytest.mark.django_db
def test_homes_are_listed_as_volumes_to_their_workspace_only(cluster, client):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="20Gi"))
    submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=notebook("nlp-group"))
    listed = api_with(cluster.alice).get(VOLUMES.format(slug="vision-lab")).json()
    assert [(v["name"], v["size_gib"], v["home_of"]) for v in listed["volumes"]] == [("home-scratch", 20, "scratch")]
    assert listed["used_gib"] == 20
    assert api_with(cluster.bob).get(VOLUMES.format(slug="vision-lab")).status_code == 404
    assert api_with(cluster.bob).get(VOLUMES.format(slug="nlp-group")).json()["used_gib"] == 10

    client.force_login(cluster.alice)
    page = client.get("/w/vision-lab/volumes/").content.decode()
    assert 'data-volume="home-scratch"' in page and 'data-home-of="scratch"' in page
    assert "home of notebook scratch" in page
    notebooks = client.get("/notebooks/?workspace=vision-lab").content.decode()
    assert 'id="homes-are-volumes"' in notebooks and 'href="/w/vision-lab/volumes/"' in notebooks
    client.force_login(cluster.bob)
    assert client.get("/w/vision-lab/volumes/").status_code == 404
    assert "home-scratch" in client.get("/w/nlp-group/volumes/").content.decode()  # its own home only


@pytest.mark.django_db
def test_a_home_claim_on_kubernetes_is_billed_as_its_volume(cluster, clock):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook())
    held = claim_index()[("gpu-ws-vision-lab", "home-scratch")]  # the claim homes always had
    assert (held.workspace_id, held.kind, held.name) == (cluster.vision.pk, "volume", "home-scratch")
    assert ("gpu-ws-nlp-group", "home-scratch") not in claim_index()
    answer = record_kubelet_volumes([{"namespace": "gpu-ws-vision-lab", "claim": "home-scratch",
                                      "used_bytes": 4096}], now=clock.now)
    assert answer == {"recorded": 1, "unknown": 0}


@pytest.mark.django_db
def test_the_migration_makes_volumes_of_old_homes_and_moves_their_files(cluster, settings, tmp_path):
    settings.NOTEBOOK_HOME_DIR, settings.VOLUMES_DIR = tmp_path / "homes", tmp_path / "volumes"
    live = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=notebook(home="20Gi"))
    Volume.objects.all().delete()  # as before homes were volumes
    old = settings.NOTEBOOK_HOME_DIR / "vision-lab" / "lab"  # an ended notebook's home, on the simulated cluster
    old.mkdir(parents=True)
    (old / "notes.txt").write_text("from before")
    (settings.NOTEBOOK_HOME_DIR / "gone-workspace" / "x").mkdir(parents=True)
    storage.create_volume(cluster.bob, cluster.nlp, name="home-lab", size_gib=1)  # another tenant's: no matter

    migration = importlib.import_module("scheduling.migrations.0019_notebook_homes_as_volumes")
    migration.homes_as_volumes(apps, None)
    migration.homes_as_volumes(apps, None)  # again: nothing more
    homes = {v.home_of: (v.name, v.size_gib) for v in Volume.objects.filter(workspace=cluster.vision)}
    assert homes == {"scratch": ("home-scratch", 20), "lab": ("home-lab", 10)}
    assert (settings.VOLUMES_DIR / "vision-lab" / "home-lab" / "notes.txt").read_text() == "from before"
    assert not old.exists()
    assert storage.home_mount(live, 20 * 1024).name == "home-scratch"
