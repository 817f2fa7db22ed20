"""A role's `volumes` (and a notebook's or service's): what the document alone may say, each problem at its
line and column; the clean form writes them back as it read them."""

from __future__ import annotations

import pytest

from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict

TRAINING = """\
name: train
roles:
  - name: main
    image: busybox:1.36
    volumes:
{entries}"""


def training(*entries: str):
    return parse_job_spec(TRAINING.format(entries="".join(f"      - {e}\n" for e in entries)))


def problems(*entries: str) -> list[tuple[int, int, str]]:
    with pytest.raises(SpecError) as caught:
        training(*entries)
    return [(i.line, i.column, i.message) for i in caught.value.errors]


def test_a_volume_and_a_dataset_are_read_and_written_back():
    spec = training("{name: imagenet, mountPath: /data, readOnly: true}", "{dataset: imagenet@v3, mountPath: /ref}",
                    "{name: scratch, mountPath: /scratch/}")
    mounts = spec.roles[0].volumes
    assert [(m.volume, m.dataset, m.mount_path, m.read_only) for m in mounts] == [
        ("imagenet", None, "/data", True), (None, "imagenet@v3", "/ref", True), ("scratch", None, "/scratch", False)]
    assert mounts[1].where == ("roles[0].volumes[1].dataset", 7, 19)
    assert parse_job_spec_obj(spec_to_dict(spec)) == spec


@pytest.mark.parametrize(("path", "says"), [
    ("data", "must be an absolute path"),
    ("/", "cannot be /"),
    ("/proc", "cannot be under /proc"),
    ("/sys/fs", "cannot be under /sys"),
    ("/dev/shm", "cannot be under /dev"),
    ("/data/../etc", "no '..'"),
])
def test_a_mount_path_that_is_relative_the_root_or_the_systems_own_is_refused_at_its_line(path, says):
    (line, column, message), = problems("{name: a, mountPath: /ok}", f"{{name: b, mountPath: '{path}'}}")
    assert (line, column) == (7, 30) and says in message and "roles[0].volumes[1].mountPath" in message


def test_two_mounts_at_one_path_name_the_other():
    (line, column, message), = problems("{name: a, mountPath: /data}", "{name: b, mountPath: /data/}")
    assert (line, column) == (7, 30)
    assert message == "/data is mounted twice (also roles[0].volumes[0])"


def test_a_mount_names_exactly_one_source_and_a_dataset_is_never_writable():
    found = problems("{mountPath: /a}", "{name: a, dataset: d@v1, mountPath: /b}",
                     "{dataset: d@v1, mountPath: /c, readOnly: false}", "{dataset: 'd@latest', mountPath: /d}",
                     "{name: Bad_Name, mountPath: /e}", "{name: a, mountPath: /f, size: 3}")
    lines = [line for line, _column, _message in found]
    assert lines == [6, 7, 8, 9, 10, 11]
    assert "exactly one of name (a volume) and dataset" in found[0][2]
    assert "always mounted read-only" in found[2][2]
    assert "is not a dataset version such as imagenet@v3" in found[3][2]
    assert "unknown field 'size'" in found[5][2]


def test_a_notebook_and_a_service_mount_at_the_top_level():
    notebook = parse_job_spec("kind: notebook\nname: nb\nvolumes:\n  - {name: data, mountPath: /data}\n")
    service = parse_job_spec("kind: inference\nname: chat\nmodel: {path: /models/x}\n"
                             "resources: {gpu: 0.5, gpuMemory: 20Gi}\n"
                             "volumes: [{name: models, mountPath: /models, readOnly: true}]\n")
    assert notebook.roles[0].volumes[0].mount_path == "/data"
    assert service.roles[0].volumes[0].read_only is True
    for spec in (notebook, service):
        assert parse_job_spec_obj(spec_to_dict(spec)) == spec
    with pytest.raises(SpecError) as caught:
        parse_job_spec("kind: notebook\nname: nb\nvolumes:\n  - {name: data, mountPath: /proc/1}\n")
    assert (caught.value.errors[0].line, caught.value.errors[0].column) == (4, 29)


def test_the_forms_say_they_cannot_show_the_volumes():
    from scheduling.spec import image_form_values

    training_spec = training("{name: data, mountPath: /data}")
    notebook = parse_job_spec("kind: notebook\nname: nb\nvolumes: [{name: data, mountPath: /data}]\n")
    for spec in (training_spec, notebook):
        assert "volumes" in image_form_values(spec)[1]
    assert "volumes" not in image_form_values(parse_job_spec("kind: notebook\nname: nb\n"))[1]
