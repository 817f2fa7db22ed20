"""The jobs API's dependencies and arrays: `after`, the parent's `array` counts, cancel by index; two tenants."""


from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState

SPEC = """name: {name}
queue: {queue}
{extra}roles:
  - {{name: main, image: busybox, resources: {{gpu: 1}}, nodePool: h100}}
"""



def submit(api, name, extra="", workspace="vision-lab"):
    return api.post(
        "/api/v1/jobs/",
        {"workspace": workspace, "spec": SPEC.format(name=name, extra=extra, queue=workspace)},
        format="json",
    )


def test_after_shows_in_the_detail_and_the_job_is_blocked(cluster, api_as):
    alice = api_as(cluster.alice)
    prep = submit(alice, "prep").json()
    body = submit(alice, "train", "after: [{job: prep, condition: finished}]\n").json()
    assert body["state"] == "Blocked" and body["pending_code"] == "waits_for_jobs"
    assert body["after"] == [{"job": prep["id"], "name": "prep", "condition": "finished"}]
    detail = alice.get(f"/api/v1/jobs/{body['id']}/").json()
    assert detail["after"] == body["after"] and detail["array"] is None
    assert "prep" in detail["pending_reason_text"]


def test_a_dependency_on_another_workspaces_job_is_a_problem_naming_the_line(cluster, api_as):
    theirs = submit(api_as(cluster.bob), "prep", workspace="nlp-group")
    assert theirs.status_code == 201, theirs.json()
    refused = submit(api_as(cluster.alice), "train", f"after: [{theirs.json()['id']}]\n")
    assert refused.status_code == 400
    [error] = refused.json()["errors"]
    assert error["line"] == 3 and "no job" in error["message"]
    assert not Job.objects.filter(workspace=cluster.vision).exists()


def test_an_array_parent_has_counts_by_state_and_cancels_by_index(cluster, api_as, clock, run):
    alice = api_as(cluster.alice)
    body = submit(alice, "sweep", 'array: {indices: "0-5", parallelism: 2}\n').json()
    detail = alice.get(f"/api/v1/jobs/{body['id']}/").json()
    assert detail["array"] == {
        "indices": "0-5",
        "parallelism": 2,
        "counts": {"Pending": 6},
        "total_cost": "0.00",
    }
    run(SimulatedBackend(speedup=60, failure_rate=0, clock=clock), clock)
    detail = alice.get(f"/api/v1/jobs/{body['id']}/").json()
    assert detail["array"]["counts"] == {"Pending": 4, "Scheduled": 2}
    child = Job.objects.get(array_parent_id=body["id"], array_index=1)
    child_detail = alice.get(f"/api/v1/jobs/{child.pk}/").json()
    assert (child_detail["array_parent"], child_detail["array_index"]) == (body["id"], 1)

    assert (
        api_as(cluster.bob)
        .post(f"/api/v1/jobs/{body['id']}/cancel/", {"index": 1}, format="json")
        .status_code
        == 404
    )
    cancelled = alice.post(f"/api/v1/jobs/{body['id']}/cancel/", {"index": 1}, format="json")
    assert cancelled.status_code == 200, cancelled.json()
    child.refresh_from_db()
    assert child.state == JobState.CANCELLED
    assert alice.post(f"/api/v1/jobs/{body['id']}/cancel/", {"index": 99}, format="json").status_code == 404
    assert alice.post(f"/api/v1/jobs/{body['id']}/cancel/", {"index": -1}, format="json").status_code == 400
    whole = alice.post(f"/api/v1/jobs/{body['id']}/cancel/")
    assert whole.json()["state"] == "Cancelled"
    counts = alice.get(f"/api/v1/jobs/{body['id']}/").json()["array"]["counts"]
    assert counts == {"Cancelled": 2}
