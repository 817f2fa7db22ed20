"""The capacity planner's three target figures, as the trace replays give them (bench/replay.py): the strict
jobs' p95 wait, the share of deadline jobs done by their deadlines, and best-effort completion; deadline jobs
replayed as such, from an uploaded trace's `soft` lines or the history's `complete_by`."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.console import planner_services as services
from portal.console.models import PlannerRun
from portal.console.planner_forms import pool_field
from portal.console.tasks import run_planner
from scheduling.core import builders
from scheduling.history import HistoryJob, replay_jobs
from tests.portal.console.test_planner import form_data
from tests.world import POOLS

# an 8-GPU strict hour, two 1-GPU deadline jobs (done within 1,200 s and 700 s of submission) and a best-effort
# job: all fit the actual cluster at once; on one 8-GPU node the strict job holds it for the hour
TRACE = ("job_id,user,num_gpu,submit_time,duration,expect_time_list,best_effort,job_type\n"
         "1,vision-lab,8,0,3600,,0,strict\n"
         "2,vision-lab,1,0,600,1200,0,soft\n"
         "3,vision-lab,1,0,600,700,0,soft\n"
         "4,vision-lab,1,60,600,,1,best\n")


def test_a_trace_replay_shows_strict_waits_deadlines_met_and_best_effort_completion(cluster, client, operator, clock,
                                                                                   django_capture_on_commit_callbacks):
    client.force_login(operator)
    one_node = {pool_field(name, "nodes"): "1" if name == "h100" else "0" for name in POOLS}
    with django_capture_on_commit_callbacks(execute=False):
        answer = client.post("/console/planner/", form_data(
            trace=SimpleUploadedFile("deadlines.csv", TRACE.encode()), trace_queue="nlp-group", **one_node))
    assert answer.status_code == 302
    run = PlannerRun.objects.get()
    assert run_planner(run.pk) is True
    run.refresh_from_db()
    actual, edited = run.results["actual"]["total"], run.results["edited"]["total"]
    # the actual cluster starts everything at once: every deadline met, best-effort done 600 s after submission
    assert {k: actual[k] for k in TARGETS} == {
        "strict_jobs": 1, "strict_wait_p95_s": 0, "deadline_jobs": 2, "deadline_met": 2, "deadline_met_pct": 100.0,
        "best_effort_jobs": 1, "best_effort_finished": 1, "best_effort_jct_p95_s": 600}
    # one node: the strict job takes it; the deadline jobs turn strict at their latest starts but may not
    # preempt a job of their own priority, so both miss, and the best-effort job waits for the hour's end
    assert {k: edited[k] for k in TARGETS} == {
        "strict_jobs": 1, "strict_wait_p95_s": 0, "deadline_jobs": 2, "deadline_met": 0, "deadline_met_pct": 0.0,
        "best_effort_jobs": 1, "best_effort_finished": 1, "best_effort_jct_p95_s": 3600 + 600 - 60}

    page = client.get(f"/console/planner/runs/{run.pk}/").content.decode()
    table = page[page.index('id="planner-targets"'):]
    table = table[:table.index("</table>")]
    actual_row = table[table.index('data-side="actual"'):table.index('data-side="edited"')]
    edited_row = table[table.index('data-side="edited"'):]
    assert ">0 s<" in actual_row and "100.00 % (2 / 2)" in actual_row and ">1 / 1<" in actual_row
    assert ">600 s<" in actual_row
    assert "0.00 % (0 / 2)" in edited_row and ">4140 s<" in edited_row
    status = client.get(f"/console/planner/runs/{run.pk}/?partial=status").json()
    assert status["targets"]["edited"]["deadline_met"] == 0 and status["targets"]["actual"]["deadline_met"] == 2


TARGETS = ("strict_jobs", "strict_wait_p95_s", "deadline_jobs", "deadline_met", "deadline_met_pct",
           "best_effort_jobs", "best_effort_finished", "best_effort_jct_p95_s")


def test_the_history_replays_a_deadline_job_with_its_latest_start_and_counts_preemptible_work_best_effort(settings):
    settings.DEADLINE_SAFETY_MARGIN = 0.2
    strict = builders.job("1", "vision-lab", 1, preemptible=False)
    deadline = builders.job("2", "vision-lab", 1, preemptible=False)
    spare = builders.job("3", "vision-lab", 1, preemptible=True)
    history = [HistoryJob(strict, 1000.0, 600.0, "h100", True),
               HistoryJob(deadline, 1000.0, 600.0, "h100", True, complete_by=5000.0),
               HistoryJob(spare, 1000.0, 600.0, "h100", True)]
    jobs = replay_jobs(history, checkpoint_s=None)
    assert [(j.deadline, j.margin_s) for j in jobs] == [(None, 0.0), (5000.0, 120.0), (None, 0.0)]
    assert jobs[1].latest_start(0.0) == 5000.0 - 600.0 - 120.0
    assert services.best_effort_ids(jobs, trace=False) == {"3"}
    # in a trace, the best-effort lines are those of the lower priority; a deadline job is never one
    traced = services.trace_jobs(TRACE, services.cm.Snapshot(pools=(), nodes=(), queues=(), jobs=()),
                                 default_queue="vision-lab", start=0.0, checkpoint_s=None)
    assert services.best_effort_ids(traced, trace=True) == {"trace-4"}
    assert [(j.job.id, j.deadline) for j in traced if j.deadline is not None] == [("trace-2", 1200.0),
                                                                                  ("trace-3", 700.0)]


OLD_SIDE = {"total": {"gpus": 8}, "queues": {}, "pools": {}, "allocation": {"start": 0.0, "step_s": 1.0, "gpus": []}}


@pytest.mark.parametrize("results", [{}, {"jobs": 0, "actual": OLD_SIDE, "edited": OLD_SIDE}])
def test_a_run_stored_before_the_targets_shows_its_page_without_them(cluster, client, operator, results):
    run = PlannerRun.objects.create(kind="whatif", inputs={"days": 30}, state="done", results=results)
    client.force_login(operator)
    page = client.get(f"/console/planner/runs/{run.pk}/")
    assert page.status_code == 200 and 'data-side="actual"' not in page.content.decode().split('id="planner-targets"')[-1]
