"""`terminationGracePeriod` and `checkpoint` in the task YAML: read, written back, each problem at its line and
column; at submit the checkpoint volume must be the workspace's and the grace within the queue's maximum."""

from __future__ import annotations

import pytest

from scheduling import services, storage
from scheduling.models import Job, Queue
from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict

HEAD = """\
name: train
queue: vision-lab
{extra}roles:
  - name: main
    image: busybox:1.36
    nodePool: h100
"""


def read(extra: str):
    return parse_job_spec(HEAD.format(extra=extra))


def problems(extra: str) -> list[tuple]:
    with pytest.raises(SpecError) as caught:
        read(extra)
    return [(i.line, i.column, i.field, i.message) for i in caught.value.errors]


def test_the_grace_and_a_resumable_checkpoint_are_read_and_written_back():
    spec = read("terminationGracePeriod: 2m\ncheckpoint: {path: /ckpt, volume: runs, every: 15m}\n")
    assert spec.termination_grace_s == 120
    assert (spec.checkpoint.path, spec.checkpoint.volume, spec.checkpoint.every_s) == ("/ckpt", "runs", 900)
    assert spec.checkpoint.resumable and spec.checkpoint.where == ("checkpoint.volume", 4, 35)
    written = spec_to_dict(spec)
    assert written["terminationGracePeriod"] == "2m"
    assert written["checkpoint"] == {"path": "/ckpt", "volume": "runs", "every": "15m"}
    assert parse_job_spec_obj(written) == spec


def test_defaults_thirty_seconds_of_grace_and_half_hourly_checkpoints():
    spec = read("checkpoint: {path: /ckpt, volume: runs}\n")
    assert spec.termination_grace_s == 30 and spec.checkpoint.every_s == 1800
    assert "terminationGracePeriod" not in spec_to_dict(spec)
    assert read("").checkpoint is None


def test_the_older_checkpoint_path_stays_a_path_without_a_volume():
    spec = read("checkpointPath: s3://bucket/run-1/\n")
    assert spec.checkpoint_path == "s3://bucket/run-1/"
    assert not spec.checkpoint.resumable and spec.checkpoint.every_s is None
    assert spec_to_dict(spec)["checkpointPath"] == "s3://bucket/run-1/"
    assert parse_job_spec_obj(spec_to_dict(spec)) == spec


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("terminationGracePeriod: 2\n", (3, 25, "terminationGracePeriod", "has no unit")),
        ("terminationGracePeriod: 2d\n", (3, 25, "terminationGracePeriod", "must be at most 1d")),
        ("checkpoint: /ckpt\n", (3, 13, "checkpoint", "checkpoint must be a mapping")),
        ("checkpoint: {volume: runs}\n", (3, 13, "checkpoint.path", "checkpoint.path is required")),
        ("checkpoint: {path: ckpt, volume: runs}\n", (3, 20, "checkpoint.path", "must be an absolute path")),
        ("checkpoint: {path: /ckpt, volume: Runs!}\n", (3, 35, "checkpoint.volume", "is not valid")),
        ("checkpoint: {path: /ckpt, every: 10s}\n", (3, 34, "checkpoint.every", "must be at least 1m")),
        ("checkpoint: {path: /ckpt, often: 1h}\n", (3, 27, "checkpoint.often", "unknown field 'often'")),
        ("checkpointPath: s3://a/\ncheckpoint: {path: /ckpt}\n", (3, 1, "checkpointPath", "older spelling")),
    ],
)
def test_each_problem_is_at_its_line_and_column(extra, expected):
    found = problems(extra)
    assert len(found) == 1
    line, column, field, message = found[0]
    assert (line, column, field) == expected[:3]
    assert expected[3] in message


def test_a_notebook_takes_a_grace_but_no_checkpoint():
    notebook = parse_job_spec("kind: notebook\nname: lab\nterminationGracePeriod: 1m\n")
    assert notebook.termination_grace_s == 60
    assert spec_to_dict(notebook)["terminationGracePeriod"] == "1m"
    with pytest.raises(SpecError, match="checkpoint applies to training"):
        parse_job_spec("kind: notebook\nname: lab\ncheckpoint: {path: /ckpt}\n")


@pytest.mark.django_db
def test_submit_refuses_a_checkpoint_volume_the_workspace_lacks_at_its_line(cluster):
    text = HEAD.format(extra="checkpoint: {path: /ckpt, volume: runs}\n")
    with pytest.raises(SpecError) as caught:
        services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=text)
    [issue] = caught.value.errors
    assert (issue.line, issue.column, issue.field) == (3, 35, "checkpoint.volume")
    assert "workspace 'vision-lab' has no volume 'runs'" in issue.message
    assert not Job.objects.exists()
    # another tenant's volume of that name is not the workspace's
    storage.create_volume(cluster.bob, cluster.nlp, name="runs", size_gib=1)
    with pytest.raises(SpecError):
        services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=text)
    storage.create_volume(cluster.alice, cluster.vision, name="runs", size_gib=1)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=text)
    assert job.spec["checkpoint"] == {"path": "/ckpt", "volume": "runs", "every": "30m"}


@pytest.mark.django_db
def test_submit_refuses_a_grace_above_the_queues_maximum_with_both_figures(cluster):
    Queue.objects.filter(name="vision-lab").update(max_termination_grace_s=120)
    with pytest.raises(SpecError) as caught:
        services.submit_job(
            user=cluster.alice,
            workspace=cluster.vision,
            spec=HEAD.format(extra="terminationGracePeriod: 5m\n"),
        )
    assert "terminationGracePeriod: 5m is longer than queue vision-lab allows (at most 2m)" in str(
        caught.value
    )
    assert not Job.objects.exists()
    job = services.submit_job(
        user=cluster.alice, workspace=cluster.vision, spec=HEAD.format(extra="terminationGracePeriod: 2m\n")
    )
    assert job.spec["terminationGracePeriod"] == "2m"


def test_the_image_form_round_trips_the_grace_and_the_checkpoint():
    from scheduling.spec import image_form_values, spec_from_image_form

    form = {
        "image": "busybox",
        "gracePeriod": "2m",
        "checkpointPathField": "/ckpt",
        "checkpointVolume": "runs",
        "checkpointEvery": "15m",
    }
    spec = spec_from_image_form(form)
    assert spec.termination_grace_s == 120
    assert (spec.checkpoint.path, spec.checkpoint.volume, spec.checkpoint.every_s) == ("/ckpt", "runs", 900)
    values, hidden = image_form_values(spec)
    assert {key: values[key] for key in form} == form
    assert hidden == []  # the form shows them: filling it in again keeps them
    assert spec_from_image_form({key: values[key] for key in form}) == spec


def test_the_image_form_leaves_them_blank_at_their_defaults_and_says_the_older_path_is_hidden():
    from scheduling.spec import image_form_values, spec_from_image_form

    values, hidden = image_form_values(spec_from_image_form({"image": "busybox"}))
    assert [
        values[k] for k in ("gracePeriod", "checkpointPathField", "checkpointVolume", "checkpointEvery")
    ] == ["", "", "", ""]
    assert hidden == []
    values, hidden = image_form_values(spec_from_image_form({"image": "busybox", "gracePeriod": "0s"}))
    assert values["gracePeriod"] == "0"  # no grace at all is not the default
    assert spec_from_image_form({"image": "busybox", "gracePeriod": "0"}).termination_grace_s == 0
    values, hidden = image_form_values(read("checkpointPath: s3://bucket/run-1/\n"))
    assert hidden == ["checkpointPath"] and values["checkpointPathField"] == ""


def test_the_image_form_names_a_wrong_checkpoint_field_by_its_form_name():
    from scheduling.spec import spec_from_image_form

    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox", "checkpointPathField": "/ckpt", "checkpointEvery": "10s"})
    assert [e.field for e in caught.value.errors] == ["checkpointEvery"]
