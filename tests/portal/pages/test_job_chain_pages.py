"""Pages of dependencies and arrays: the job page's chain and array, cancel by index, the workspace's chains;
scoped to the caller's workspaces."""

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState

SPEC = """name: {name}
queue: vision-lab
{extra}roles:
  - {{name: main, image: busybox, resources: {{gpu: 1}}, nodePool: h100}}
"""


def submit(cluster, name, extra=""):
    return submit_quoted_job(
        user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name=name, extra=extra)
    )


def test_the_job_page_draws_the_chain_and_the_workspace_page_lists_it(client, cluster, clock):
    prep = submit(cluster, "prep")
    train = submit(cluster, "train", "after: [prep]\n")
    report = submit(cluster, "report", "after: [{job: train, condition: finished}]\n")
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{train.pk}/").content.decode()
    assert (
        'id="job-chain"' in page
        and f'href="/jobs/{prep.pk}/"' in page
        and f'href="/jobs/{report.pk}/"' in page
    )
    assert (
        page.index(f"prep #{prep.pk}") < page.index(f"train #{train.pk}") < page.index(f"report #{report.pk}")
    )
    assert "waits for job prep" in page  # its reason
    workspace = client.get("/w/vision-lab/").content.decode()
    assert 'id="workspace-chains"' in workspace and f"train #{train.pk}" in workspace
    client.force_login(cluster.bob)
    assert client.get(f"/jobs/{train.pk}/").status_code == 404
    assert client.get("/w/vision-lab/").status_code == 404


def test_an_array_page_shows_counts_cost_and_indices_and_cancels_one(client, cluster, clock, run):
    parent = submit(cluster, "sweep", 'array: {indices: "0-5", parallelism: 2}\n')
    run(SimulatedBackend(speedup=60, failure_rate=0, clock=clock), clock)
    client.force_login(cluster.alice)
    page = client.get(f"/jobs/{parent.pk}/").content.decode()
    assert 'id="job-array"' in page and "Indices 0-5, at most 2 at a time." in page
    assert 'id="array-total-cost"' in page and 'id="cancel-index"' in page
    child = Job.objects.get(array_parent=parent, array_index=1)
    assert f'href="/jobs/{child.pk}/"' in page
    assert f'href="/jobs/{parent.pk}/"' in client.get(f"/jobs/{child.pk}/").content.decode()

    client.force_login(cluster.bob)
    assert client.post(f"/jobs/{parent.pk}/cancel/", {"index": "1"}).status_code == 404
    client.force_login(cluster.alice)
    answer = client.post(f"/jobs/{parent.pk}/cancel/", {"index": "1"}, follow=True).content.decode()
    assert "Index 1 of sweep cancelled." in answer
    child.refresh_from_db()
    parent.refresh_from_db()
    assert child.state == JobState.CANCELLED and parent.state != JobState.CANCELLED
    answer = client.post(f"/jobs/{parent.pk}/cancel/", {"index": "77"}, follow=True).content.decode()
    assert "no index 77" in answer
