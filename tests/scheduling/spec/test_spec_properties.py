"""Property tests: whatever comes in, the parser answers a JobSpec or a SpecError, never a crash;
and every spec it answers survives the trip to YAML and back."""

from __future__ import annotations

import copy
import math
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.spec import (
    ClusterInfo,
    JobSpec,
    PoolInfo,
    SpecError,
    parse_job_spec,
    parse_job_spec_obj,
    spec_from_image_form,
    spec_to_dict,
    spec_to_yaml,
)
from scheduling.spec.read import CLEAN_KEYS, RESOURCE_KEYS, ROLE_KEYS, SEED_KEYS

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CLUSTER = ClusterInfo(
    pools=(
        PoolInfo("h100", "nvidia", "H100-80GB", 81920, 8),
        PoolInfo(
            "h100-mig", "nvidia", "H100-80GB", 81920, 8, frozenset({"mig"}), frozenset({"3g.40gb", "1g.10gb"})
        ),
        PoolInfo("l40s-shared", "nvidia", "L40S-48GB", 49152, 4, frozenset({"timeslice"})),
        PoolInfo("mi300x", "amd", "MI300X-192GB", 196608, 8),
    )
)
QUEUES = frozenset({"vision-lab", "community"})

CLEAN_DOC: dict[str, Any] = {
    "name": "bert-finetune",
    "type": "pytorch",
    "queue": "vision-lab",
    "priority": 20,
    "reduceCost": False,
    "expectedDuration": "2h",
    "roles": [
        {
            "name": "worker",
            "image": "pytorch/pytorch:2.4.0",
            "command": ["python", "train.py"],
            "env": {"EPOCHS": "3"},
            "replicas": {"min": 1, "max": 4},
            "sharing": "fraction",
            "resources": {"gpu": 0.5, "gpuMemory": "10Gi", "cpu": 4, "memory": "16Gi"},
            "vendor": "nvidia",
        }
    ],
}
SEED_DOC: dict[str, Any] = {
    "TaskName": "training1",
    "Priority": 50,
    "TaskType": "MPI",
    "MaxReplicas": 50,
    "MinReplicas": 10,
    "AMDSupport": True,
    "ReduceCost": True,
    "TaskImage": "vacant.io/training:1.0",
    "MasterImage": "vacant.io/training-master:1.0",
    "WorkerImage": "vacant.io/training-worker:1.0",
    "MasterMaxReplicas": 10,
    "WorkerMaxReplicas": 40,
}

VOCABULARY = sorted({*CLEAN_KEYS, *ROLE_KEYS, *RESOURCE_KEYS, *SEED_KEYS, "min", "max", "<<", "EPOCHS"})
INTERESTING_TEXT = [
    "0.5",
    "10Gi",
    "16GB",
    "500m",
    "3g.40gb",
    "7g.80gb",
    "1h",
    "1h30m",
    "90d",
    "exclusive",
    "fraction",
    "mig",
    "timeslice",
    "pytorch",
    "mpi",
    "single",
    "MPI",
    "PyTorch",
    "other",
    "nvidia",
    "amd",
    "any",
    "master",
    "worker",
    "h100",
    "mi300x",
    "H100-80GB",
    "vision-lab",
    "img:1",
    "",
    " ",
    "é",
    "\t",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(INTERESTING_TEXT),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=25,
)
documents = st.dictionaries(keys, values, max_size=10)


def check_answer(parse: Any, *args: Any, **kwargs: Any) -> JobSpec | None:
    """The parser's answer must be a JobSpec or a SpecError with located, named messages."""
    try:
        spec = parse(*args, **kwargs)
    except SpecError as exc:
        assert exc.errors, "a SpecError must carry at least one issue"
        for issue in exc.errors:
            assert isinstance(issue.message, str) and issue.message
            assert (issue.line is None) == (issue.column is None)
            assert issue.line is None or (issue.line >= 1 and issue.column >= 1)
        return None
    assert isinstance(spec, JobSpec)
    assert spec.roles and spec.min_replicas >= 1
    return spec


def check_round_trip(spec: JobSpec | None) -> None:
    if spec is not None:
        assert parse_job_spec(spec_to_yaml(spec)) == spec
        assert parse_job_spec_obj(spec_to_dict(spec)) == spec


@SETTINGS
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text: str) -> None:
    check_answer(parse_job_spec, text)


@SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    check_answer(parse_job_spec, data)


YAML_PIECES = [
    "name: ",
    "roles:",
    "\n",
    "  ",
    "- ",
    ": ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    "<<: ",
    "!!python/name:x ",
    "!!str ",
    "!tag ",
    "? ",
    "'",
    '"',
    "#",
    "---\n",
    "...",
    "|\n",
    ">\n",
    "TaskName: ",
    "gpu: ",
    "0.5",
    "1e999",
    "~",
    "yes",
    "0x1f",
    "1:30",
    "2024-01-01",
    "\\",
    "%YAML 1.1\n",
    "\t",
    "@",
    "`",
]


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(YAML_PIECES), st.text(max_size=4)), max_size=40))
def test_yaml_token_soup_never_crashes(pieces: list[str]) -> None:
    check_answer(parse_job_spec, "".join(pieces), cluster=CLUSTER, workspace_queues=QUEUES)


@SETTINGS
@given(documents)
def test_arbitrary_structures_never_crash(doc: dict[str, Any]) -> None:
    spec = check_answer(parse_job_spec_obj, doc, cluster=CLUSTER, workspace_queues=QUEUES)
    check_round_trip(spec)
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return
    check_round_trip(check_answer(parse_job_spec, text, cluster=CLUSTER))


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


@SETTINGS
@given(st.sampled_from([CLEAN_DOC, SEED_DOC]), st.data())
def test_mutated_valid_specs_never_crash(base: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)[1:]))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(values)
    spec = check_answer(parse_job_spec_obj, doc, cluster=CLUSTER, workspace_queues=QUEUES)
    check_round_trip(spec)
    check_round_trip(check_answer(parse_job_spec, yaml.safe_dump(doc, allow_unicode=True)))


@SETTINGS
@given(
    st.sampled_from([{}, {"image": "img:1"}, {"image": "registry.io/a/b:2", "gpus": "1"}]),
    st.dictionaries(
        st.sampled_from(
            [
                "name",
                "image",
                "gpus",
                "sharing",
                "gpuMemory",
                "mig",
                "minReplicas",
                "maxReplicas",
                "priority",
                "reduceCost",
                "queue",
                "vendor",
                "command",
                "expectedDuration",
                "other",
            ]
        ),
        st.one_of(st.sampled_from(INTERESTING_TEXT + ["1", "2", "0.25", "on", "x y", "'"]), scalars),
        max_size=8,
    ),
)
def test_image_form_never_crashes(base: dict[str, Any], form: dict[str, Any]) -> None:
    form = base | form
    check_round_trip(check_answer(spec_from_image_form, form, cluster=CLUSTER, workspace_queues=QUEUES))


@SETTINGS
@given(
    gpu=st.one_of(st.integers(0, 8), st.integers(1, 99).map(lambda n: n / 100)),
    low=st.integers(0, 5),
    extra=st.integers(0, 5),
    cpu=st.integers(1, 64000),
    mem=st.integers(1, 1 << 20),
    seconds=st.integers(1, 90 * 86400),
)
def test_valid_specs_round_trip(gpu: float, low: int, extra: int, cpu: int, mem: int, seconds: int) -> None:
    doc = copy.deepcopy(CLEAN_DOC)
    del doc["roles"][0]["sharing"]
    doc["roles"][0]["resources"] = {"gpu": gpu, "cpu": f"{cpu}m", "memory": f"{mem}Mi"}
    doc["roles"][0]["replicas"] = {"min": max(low, 1), "max": max(low, 1) + extra}
    doc["expectedDuration"] = f"{seconds}s"
    spec = parse_job_spec_obj(doc)
    role = spec.roles[0]
    assert role.num_gpus * role.gpu_milli == round(gpu * 1000)
    assert role.sharing == ("fraction" if not float(gpu).is_integer() else "exclusive")
    assert (role.cpu_milli, role.mem_mib, spec.expected_duration_s) == (cpu, mem, seconds)
    assert math.isclose(spec.max_gpu_milli / 1000, (max(low, 1) + extra) * gpu)
    check_round_trip(spec)
