"""Schedules API for two tenants: make, list, detail, suspend, resume, trigger, delete, problem details."""

from __future__ import annotations

from scheduling.models import Job, Schedule

SPEC = """\
name: nightly
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    resources: {gpu: 1}
schedule:
  cron: "0 2 * * *"
  timeZone: Asia/Shanghai
  concurrency: Forbid
  keepLast: 5
"""



def create(api, spec=SPEC, workspace="vision-lab"):
    return api.post("/api/v1/schedules/", {"workspace": workspace, "spec": spec}, format="json")


def test_alice_makes_a_schedule_and_sees_it_with_its_next_fire_times(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    made = create(alice)
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["name"] == "nightly" and body["cron"] == "0 2 * * *" and body["time_zone"] == "Asia/Shanghai"
    assert body["concurrency"] == "Forbid" and body["keep_last"] == 5 and body["suspended"] is False
    assert len(body["next_fire_times"]) == 3 and all(
        t.endswith(("18:00:00Z", "18:00:00+00:00")) for t in body["next_fire_times"]
    )
    assert body["runs"] == [] and body["firings"] == [] and "schedule" not in body["spec"]
    listed = alice.get("/api/v1/schedules/", {"workspace": "vision-lab"}).json()
    assert [s["name"] for s in listed["results"]] == ["nightly"]
    assert alice.get(f"/api/v1/schedules/{body['id']}/").json()["quote"]["when"] == "now"


def test_suspend_resume_trigger_and_delete(cluster, clock, api_as):
    carol = api_as(cluster.carol)
    schedule_id = create(api_as(cluster.alice)).json()["id"]
    suspended = carol.post(f"/api/v1/schedules/{schedule_id}/suspend/").json()
    assert (
        suspended["suspended"] is True
        and suspended["next_fire_times"] == []
        and suspended["next_fire_at"] is None
    )
    resumed = carol.post(f"/api/v1/schedules/{schedule_id}/resume/").json()
    assert resumed["suspended"] is False and resumed["next_fire_at"]
    run = carol.post(f"/api/v1/schedules/{schedule_id}/trigger/")
    assert run.status_code == 201 and run.json()["name"] == "nightly" and run.json()["state"] == "Pending"
    again = carol.post(f"/api/v1/schedules/{schedule_id}/trigger/")
    assert again.status_code == 409 and again["Content-Type"] == "application/problem+json"
    assert "concurrency is Forbid" in again.json()["detail"]
    detail = carol.get(f"/api/v1/schedules/{schedule_id}/").json()
    assert [r["id"] for r in detail["runs"]] == [run.json()["id"]]
    assert carol.delete(f"/api/v1/schedules/{schedule_id}/").status_code == 204
    assert not Schedule.objects.exists() and Job.objects.get().schedule is None  # the run stays a job


def test_bob_cannot_see_or_act_on_alices_schedule(cluster, clock, api_as):
    schedule_id = create(api_as(cluster.alice)).json()["id"]
    bob = api_as(cluster.bob)
    assert bob.get("/api/v1/schedules/").json()["results"] == []
    assert bob.get("/api/v1/schedules/", {"workspace": "vision-lab"}).status_code == 404
    assert bob.get(f"/api/v1/schedules/{schedule_id}/").status_code == 404
    for action in ("suspend", "resume", "trigger"):
        assert bob.post(f"/api/v1/schedules/{schedule_id}/{action}/").status_code == 404
    assert bob.delete(f"/api/v1/schedules/{schedule_id}/").status_code == 404
    assert create(bob).status_code == 404
    schedule = Schedule.objects.get()
    assert not schedule.suspended and not Job.objects.exists()


def test_spec_errors_are_problem_details_at_line_and_column_and_make_nothing(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    response = create(alice, SPEC.replace("Asia/Shanghai", "Asia/Shangai").replace("Forbid", "Never"))
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    errors = {(e["field"], e["line"], e["column"]) for e in response.json()["errors"]}
    assert errors == {("schedule.timeZone", 9, 13), ("schedule.concurrency", 10, 16)}
    no_block = create(alice, SPEC.split("schedule:")[0])
    assert no_block.status_code == 400 and "no schedule block" in str(no_block.json())
    as_job = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC}, format="json")
    assert as_job.status_code == 400 and "/api/v1/schedules/" in str(as_job.json())
    assert create(alice).status_code == 201
    assert create(alice).status_code == 409  # one schedule per name in a workspace
    assert Schedule.objects.count() == 1 and not Job.objects.exists()
