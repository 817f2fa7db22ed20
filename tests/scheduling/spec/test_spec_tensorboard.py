"""`tensorboard: {logdir}` in the task YAML: read, written back, refused with a clear message at its line."""

import pytest

from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict
from scheduling.spec.model import TensorBoardSpec

ROLES = "roles: [{name: main, image: busybox}]\n"


def errors(text):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    return [(e.line, e.field, e.message) for e in caught.value.errors]


def test_the_logdir_is_read_and_written_back():
    spec = parse_job_spec("name: a\ntensorboard: {logdir: /ckpt/tb}\n" + ROLES)
    assert spec.tensorboard == TensorBoardSpec(logdir="/ckpt/tb")
    out = spec_to_dict(spec)
    assert out["tensorboard"] == {"logdir": "/ckpt/tb"}
    assert parse_job_spec_obj(out) == spec
    assert parse_job_spec("name: a\n" + ROLES).tensorboard is None
    assert "tensorboard" not in spec_to_dict(parse_job_spec("name: a\n" + ROLES))


@pytest.mark.parametrize("given, says", [
    ("tensorboard: /ckpt/tb", "tensorboard must be a mapping of logdir, e.g. {logdir: /ckpt/tb}"),
    ("tensorboard: {}", "logdir"),
    ("tensorboard: {logdir: ckpt/tb}", "tensorboard.logdir must be an absolute path such as /data"),
    ("tensorboard: {logdir: /ckpt/../etc}", "no '..'"),
    ("tensorboard: {logdir: /ckpt/tb, port: 7007}", "port"),
])
def test_a_wrong_tensorboard_is_refused_at_its_line(given, says):
    found = errors("name: a\n" + given + "\n" + ROLES)
    assert any(line == 2 and says in message for line, _field, message in found), found


def test_a_notebook_is_told_tensorboard_is_for_training():
    found = errors("kind: notebook\nname: lab\ntensorboard: {logdir: /home/jovyan/tb}\n")
    assert any("tensorboard does not apply to kind notebook" in message for _l, _f, message in found), found
