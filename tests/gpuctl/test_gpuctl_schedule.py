"""`gpuctl submit` of a spec with `schedule:` and `gpuctl schedule list|show|suspend|resume|trigger|rm` against the
real ASGI server: errors at FILE:LINE:COL, Forbid refused in one line; bob reaches none of alice's schedules."""

from __future__ import annotations

import json

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)

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
"""


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "nightly.yaml"
    path.write_text(SPEC)
    return path


def test_submit_makes_a_schedule_and_the_schedule_commands_act_on_it(gpuctl, tokens, cluster, spec_file):
    from scheduling.models import Job, Schedule

    alice = tokens["alice"]
    code, out, err = gpuctl(alice, "submit", str(spec_file), "-w", "vision-lab", "--quote-only")
    assert (
        code == 0
        and "a month of runs (30, 0 2 * * * in Asia/Shanghai):" in out
        and not Schedule.objects.exists()
    )
    code, out, err = gpuctl(alice, "submit", str(spec_file), "-w", "vision-lab")
    schedule = Schedule.objects.get()
    assert (code, err) == (0, "") and out.startswith(
        f"schedule {schedule.pk} (nightly) in vision-lab: made; next run "
    )
    assert out.strip().endswith("18:00:00 UTC") and not Job.objects.exists()

    code, out, err = gpuctl(alice, "schedule", "list")
    header, row = out.splitlines()
    assert header.split()[:4] == ["ID", "NAME", "WORKSPACE", "CRON"]
    assert row.split()[:10] == [
        str(schedule.pk),
        "nightly",
        "vision-lab",
        "0",
        "2",
        "*",
        "*",
        "*",
        "Asia/Shanghai",
        "Forbid",
    ]
    code, out, err = gpuctl(alice, "schedule", "show", str(schedule.pk))
    assert code == 0 and "cron: 0 2 * * * in Asia/Shanghai; concurrency Forbid" in out
    assert out.count("02:00 CST)") == 3  # each next run in UTC and in the schedule's zone

    code, out, err = gpuctl(alice, "schedule", "suspend", str(schedule.pk))
    assert code == 0 and "suspended; next run - UTC" in out
    code, out, err = gpuctl(alice, "schedule", "resume", str(schedule.pk), "-o", "json")
    assert code == 0 and json.loads(out)["suspended"] is False
    code, out, err = gpuctl(alice, "schedule", "trigger", str(schedule.pk))
    job = Job.objects.get()
    assert code == 0 and out.strip() == (
        f"schedule {schedule.pk}: run {job.pk} (nightly) submitted to vision-lab, queue vision-lab: Pending"
    )
    code, out, err = gpuctl(alice, "schedule", "trigger", str(schedule.pk))
    assert code == 1 and "concurrency is Forbid" in err and len(err.strip().splitlines()) == 1
    code, out, err = gpuctl(alice, "schedule", "rm", str(schedule.pk))
    assert code == 0 and not Schedule.objects.exists() and Job.objects.count() == 1


def test_errors_at_file_line_column_and_bob_reaches_nothing(gpuctl, tokens, cluster, spec_file, tmp_path):
    from billing.services import submit_quoted_schedule
    from scheduling.models import Schedule

    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("Asia/Shanghai", "Asia/Shangai"))
    code, out, err = gpuctl(tokens["alice"], "submit", str(bad), "-w", "vision-lab")
    assert code == 2 and f"{bad}:9:13:" in err and "Asia/Shanghai" in err and not Schedule.objects.exists()

    schedule = submit_quoted_schedule(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    bob = tokens["bob"]
    code, out, err = gpuctl(bob, "schedule", "list")
    assert code == 0 and out == "" and "no schedules" in err
    for action in ("show", "suspend", "resume", "trigger", "rm"):
        code, out, err = gpuctl(bob, "schedule", action, str(schedule.pk))
        assert code == 1 and f"no such schedule: {schedule.pk}" in err, (action, err)
    assert Schedule.objects.get().suspended is False and not schedule.runs.exists()
