"""`schedule:` in a spec: read into JobSpec.schedule, every problem at its line and column, the job read as without it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.spec import (
    SpecError,
    image_form_values,
    parse_job_spec,
    parse_job_spec_obj,
    spec_from_image_form,
    spec_to_dict,
)
from scheduling.spec.model import ScheduleSpec

JOB = """\
name: nightly
roles:
  - name: main
    image: busybox:1.36
"""


def scheduled(block: str) -> str:
    return JOB + "schedule:\n" + "".join(f"  {line}\n" for line in block.splitlines())


def errors(text: str) -> list[tuple[int | None, int | None, str]]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    return [(e.line, e.column, e.message) for e in caught.value.errors]


def test_the_block_is_read_with_its_defaults_and_the_job_is_read_as_without_it():
    spec = parse_job_spec(scheduled('cron: "0 2 * * *"\ntimeZone: Asia/Shanghai'))
    assert spec.schedule == ScheduleSpec(
        cron="0 2 * * *", time_zone="Asia/Shanghai", concurrency="Forbid", keep_last=10, suspend=False
    )
    assert spec_to_dict(replace(spec, schedule=None)) == spec_to_dict(parse_job_spec(JOB))
    assert parse_job_spec_obj(spec_to_dict(spec)) == spec  # written back with its schedule
    assert parse_job_spec(JOB).schedule is None


def test_every_field_and_a_json_object():
    spec = parse_job_spec(
        scheduled('cron: "*/15  9-17 * * 1-5"\nconcurrency: replace\nkeepLast: 0\nsuspend: true')
    )
    assert spec.schedule == ScheduleSpec(
        cron="*/15 9-17 * * 1-5", time_zone=None, concurrency="Replace", keep_last=0, suspend=True
    )
    obj = {**spec_to_dict(spec), "schedule": {"cron": "@daily", "concurrency": "Allow"}}
    assert parse_job_spec_obj(obj).schedule == ScheduleSpec(cron="@daily", concurrency="Allow")


@pytest.mark.parametrize(
    ("block", "line", "column", "words"),
    [
        ('cron: "0 25 * * *"', 6, 9, "is not a valid cron line"),
        ('cron: "0 2 * *"', 6, 9, "has 4 fields; a cron line has five"),
        ('cron: "0 0 2 * * *"', 6, 9, "has 6 fields"),
        ("cron: '@fortnightly'", 6, 9, "is not one of @yearly"),
        ('cron: "0 2 * * *"\ntimeZone: Asia/Shangai', 7, 13, "did you mean 'Asia/Shanghai'"),
        ('cron: "0 2 * * *"\ntimeZone: CET+1', 7, 13, "is not a time zone"),
        ('cron: "0 2 * * *"\nconcurrency: Sometimes', 7, 16, "is not one of Forbid | Replace | Allow"),
        ('cron: "0 2 * * *"\nkeepLast: 101', 7, 13, "must be from 0 to 100"),
        ('cron: "0 2 * * *"\nsuspend: "no"', 7, 12, "must be true or false"),
        ('cron: "0 2 * * *"\ntimezone: UTC', 7, 3, "unknown field 'timezone'"),
        ("timeZone: UTC", 6, 3, "schedule.cron is required"),
    ],
)
def test_each_problem_at_its_line_and_column(block, line, column, words):
    [(at_line, at_column, message)] = errors(scheduled(block))
    assert (at_line, at_column) == (line, column) and words in message, message


def test_a_schedule_that_is_not_a_mapping_and_problems_of_the_job_come_together():
    found = errors(JOB.replace("busybox:1.36", "") + "schedule: daily\n")
    assert len(found) == 2 and found[1][:2] == (5, 11) and "must be a mapping" in found[1][2]


def test_work_that_runs_until_stopped_has_no_schedule():
    [(line, column, message)] = errors('kind: notebook\nname: nb\nschedule: {cron: "@daily"}\n')
    assert (line, column) == (3, 1) and "does not apply to a notebook" in message


def test_the_image_form_writes_and_shows_a_schedule():
    spec = spec_from_image_form(
        {
            "image": "busybox:1.36",
            "scheduleCron": "0 2 * * *",
            "scheduleTimeZone": "Asia/Shanghai",
            "scheduleConcurrency": "Replace",
        }
    )
    assert spec.schedule == ScheduleSpec(cron="0 2 * * *", time_zone="Asia/Shanghai", concurrency="Replace")
    values, hidden = image_form_values(spec)
    assert (values["scheduleCron"], values["scheduleTimeZone"], values["scheduleConcurrency"]) == (
        "0 2 * * *",
        "Asia/Shanghai",
        "Replace",
    ) and hidden == []
    assert image_form_values(spec_from_image_form(values))[0] == values
    assert image_form_values(parse_job_spec(JOB))[0]["scheduleCron"] == ""
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox:1.36", "scheduleCron": "every night"})
    [issue] = caught.value.errors
    assert issue.field == "scheduleCron" and "has 2 fields" in issue.message
