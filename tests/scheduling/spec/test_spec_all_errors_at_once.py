"""A spec with a GPU model no pool offers and other mistakes reports every one of them at once, each at its
line and column, so a user fixes them in one go rather than one submission per error."""

from __future__ import annotations

import pytest

from scheduling.spec import ClusterInfo, SpecError, parse_job_spec

TRAINING = """\
name: Bad_Name
queue: other-team
roles:
  - name: main
    image: img:1
    gpuModel: B300-NOPE
    resources: {gpu: 1, cpu: lots}
"""

INFERENCE = """\
kind: inference
name: chat
queue: vision-lab
gpuModel: b300-nope
model: {}
resources: {gpu: 1}
replicas: {min: 3, max: 2}
"""


def errors_of(text: str, cluster: ClusterInfo, queues: frozenset[str]) -> list[tuple]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text, cluster=cluster, workspace_queues=queues)
    return [(e.line, e.column, e.field, e.message) for e in caught.value.errors]


def test_a_training_spec_reports_its_model_queue_and_field_errors_together(world_pools, vision_queues):
    errors = errors_of(TRAINING, world_pools, vision_queues)
    where = {field: (line, column) for line, column, field, _ in errors}
    assert where["name"] == (1, 7)
    assert where["roles[0].resources.cpu"][0] == 7
    assert where["roles[0].gpuModel"] == (6, 15)
    assert where["queue"] == (2, 8)
    [model] = [m for _, _, field, m in errors if field == "roles[0].gpuModel"]
    assert "B300-NOPE" in model and "H100-80GB" in model   # names what is on offer


def test_an_inference_spec_reports_its_gpu_model_with_its_other_errors(world_pools, vision_queues):
    errors = errors_of(INFERENCE, world_pools, vision_queues)
    fields = [field for _, _, field, _ in errors]
    assert {"gpuModel", "model", "replicas.max"} <= set(fields), errors
    assert all(line is not None and column is not None for line, column, _, _ in errors)
    assert len(fields) == len(set(fields))   # each said once


def test_a_malformed_gpu_model_is_refused_once(world_pools, vision_queues):
    errors = errors_of(TRAINING.replace("B300-NOPE", "'B300 !!'"), world_pools, vision_queues)
    assert [field for _, _, field, _ in errors].count("roles[0].gpuModel") == 1
