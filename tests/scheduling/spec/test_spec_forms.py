"""The two YAML forms, the JSON object form and the image form map onto one JobSpec."""

from __future__ import annotations

import pytest
import yaml

from scheduling.spec import (
    JobSpec,
    RoleSpec,
    SpecError,
    parse_job_spec,
    parse_job_spec_obj,
    spec_from_image_form,
    spec_to_dict,
    spec_to_yaml,
)


def test_seed_yaml_exactly_as_written(seed_yaml: str) -> None:
    spec = parse_job_spec(seed_yaml)
    assert spec.name == "training1"
    assert spec.type == "mpi"
    assert spec.priority == 50
    assert spec.reduce_cost is True
    assert spec.preemptible is True  # ReduceCost work is preemptible
    assert spec.queue is None
    assert spec.expected_duration_s == 3600
    master, worker = spec.roles
    assert master == RoleSpec(name="master", image="vacant.io/training-master:1.0", vendor="any")
    assert (master.min_replicas, master.max_replicas) == (1, 1)
    # MinReplicas 10 / MaxReplicas 50: one master + 9..49 workers, capped at WorkerMaxReplicas 40.
    assert worker.image == "vacant.io/training-worker:1.0"
    assert (worker.min_replicas, worker.max_replicas) == (9, 40)
    assert (worker.sharing, worker.num_gpus, worker.gpu_milli) == ("exclusive", 1, 1000)
    assert worker.vendor == "any"  # AMDSupport: true
    assert spec.min_replicas == 10 and spec.max_replicas == 41
    assert spec.min_gpu_milli == 10_000 and spec.max_gpu_milli == 41_000


def test_seed_yaml_as_bytes_gives_the_same_spec(seed_yaml: str) -> None:
    assert parse_job_spec(seed_yaml.encode()) == parse_job_spec(seed_yaml)
    assert parse_job_spec(b"\xef\xbb\xbf" + seed_yaml.encode()) == parse_job_spec(seed_yaml)  # UTF-8 BOM


def test_clean_example(clean_yaml: str) -> None:
    spec = parse_job_spec(clean_yaml)
    assert (spec.name, spec.type, spec.queue, spec.priority) == ("bert-finetune", "pytorch", "vision-lab", 20)
    assert (spec.preemptible, spec.reduce_cost, spec.expected_duration_s) == (True, False, 7200)
    assert spec.checkpoint_path == "s3://bucket/run-1/"
    (role,) = spec.roles
    assert role == RoleSpec(
        name="worker",
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command=("python", "train.py"),
        env=(("EPOCHS", "3"),),
        min_replicas=1,
        max_replicas=4,
        sharing="fraction",
        num_gpus=1,
        gpu_milli=500,
        gpu_mem_mib=10 * 1024,
        cpu_milli=4000,
        mem_mib=16 * 1024,
        vendor="nvidia",
        gpu_model="A100-80GB",
        node_pool="a100-spot",
    )
    assert spec.min_gpu_milli == 500 and spec.max_gpu_milli == 2000


def test_minimal_clean_spec_gets_documented_defaults(minimal_yaml: str) -> None:
    spec = parse_job_spec(minimal_yaml)
    assert spec == JobSpec(name="job", type="single", roles=(RoleSpec(name="main", image="busybox:1.36"),))
    role = spec.roles[0]
    assert (role.num_gpus, role.gpu_milli, role.cpu_milli, role.mem_mib) == (1, 1000, 1000, 4096)
    assert (spec.priority, spec.preemptible, spec.expected_duration_s) == (0, False, 3600)


def test_reduce_cost_defaults_preemptible_to_true(minimal_yaml: str) -> None:
    assert parse_job_spec(minimal_yaml + "reduceCost: true\n").preemptible is True
    assert parse_job_spec(minimal_yaml + "reduceCost: false\n").preemptible is False


@pytest.mark.parametrize(
    ("resources", "sharing", "expected"),
    [
        ("{gpu: 2}", None, ("exclusive", 2, 1000, None, None)),
        ("{gpu: 0}", None, ("exclusive", 0, 0, None, None)),  # CPU-only role
        ("{gpu: 0.25}", None, ("fraction", 1, 250, None, None)),  # a fraction implies sharing fraction
        ("{gpu: 0.07, gpuMemory: 512Mi}", "fraction", ("fraction", 1, 70, 512, None)),
        # a MIG role's memory: what one instance can use (scheduling.core.mig), under the name's figure
        ("{mig: 3g.40gb}", None, ("mig", 1, 428, 40192, "3g.40gb")),
        ("{mig: 1g.10gb, gpu: 1}", "mig", ("mig", 1, 142, 9728, "1g.10gb")),
        ("{}", "timeslice", ("timeslice", 1, 1000, None, None)),
    ],
)
def test_resources_normalise_to_milli_gpu(resources: str, sharing: str | None, expected: tuple) -> None:
    text = f"name: j\nroles:\n  - name: main\n    image: img:1\n    resources: {resources}\n"
    if sharing:
        text += f"    sharing: {sharing}\n"
    role = parse_job_spec(text).roles[0]
    assert (role.sharing, role.num_gpus, role.gpu_milli, role.gpu_mem_mib, role.mig_profile) == expected


@pytest.mark.parametrize(
    ("cpu", "memory", "cpu_milli", "mem_mib"),
    [
        ("500m", "512Mi", 500, 512),
        ("0.5", "1G", 500, 954),
        (2, "1.5Gi", 2000, 1536),
        ("4", "1Ti", 4000, 1048576),
    ],
)
def test_cpu_and_memory_units(cpu: object, memory: str, cpu_milli: int, mem_mib: int) -> None:
    spec = parse_job_spec_obj(
        {"name": "j", "roles": [{"name": "a", "image": "i:1", "resources": {"cpu": cpu, "memory": memory}}]}
    )
    assert (spec.roles[0].cpu_milli, spec.roles[0].mem_mib) == (cpu_milli, mem_mib)


@pytest.mark.parametrize(
    ("duration", "seconds"),
    [("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("1.5h", 5400), ("45s", 45)],
)
def test_expected_duration(duration: str, seconds: int, minimal_yaml: str) -> None:
    assert parse_job_spec(minimal_yaml + f"expectedDuration: {duration}\n").expected_duration_s == seconds


def test_replicas_shorthand_and_partial_bounds() -> None:
    def replicas(value: object) -> tuple[int, int]:
        role = parse_job_spec_obj(
            {"name": "j", "roles": [{"name": "a", "image": "i", "replicas": value}]}
        ).roles[0]
        return role.min_replicas, role.max_replicas

    assert replicas(3) == (3, 3)
    assert replicas({"max": 4}) == (1, 4)
    assert replicas({"min": 2}) == (2, 2)
    assert replicas({"min": 2, "max": 8}) == (2, 8)


def test_pytorch_job_with_master_and_worker_roles() -> None:
    spec = parse_job_spec(
        "name: ddp\ntype: mpi\nroles:\n"
        "  - {name: master, image: 'img:1', resources: {gpu: 0}}\n"
        "  - {name: worker, image: 'img:1', replicas: {min: 0, max: 8}, resources: {gpu: 8}}\n"
    )
    assert [r.name for r in spec.roles] == ["master", "worker"]
    assert spec.min_gpu_milli == 0 and spec.max_gpu_milli == 64000
    assert spec.role("worker").num_gpus == 8
    with pytest.raises(KeyError):
        spec.role("launcher")


def test_seed_form_single_task_and_defaults() -> None:
    spec = parse_job_spec("TaskName: notebook\nTaskType: other\nTaskImage: jupyter/base:1\n")
    assert spec.type == "single" and spec.priority == 0
    assert (spec.preemptible, spec.reduce_cost) == (False, False)
    assert spec.roles == (RoleSpec(name="main", image="jupyter/base:1"),)


def test_seed_form_pytorch_with_task_image_for_both_roles() -> None:
    spec = parse_job_spec(
        "TaskName: t\nTaskType: PyTorch\nMinReplicas: 1\nMaxReplicas: 3\nTaskImage: img:1\nAMDSupport: false\n"
    )
    assert spec.type == "pytorch"
    assert [(r.name, r.image, r.min_replicas, r.max_replicas, r.vendor) for r in spec.roles] == [
        ("master", "img:1", 1, 1, "nvidia"),
        ("worker", "img:1", 0, 2, "nvidia"),
    ]


def test_seed_form_with_one_replica_has_only_the_master() -> None:
    spec = parse_job_spec("TaskName: t\nTaskType: mpi\nTaskImage: img:1\n")
    assert [r.name for r in spec.roles] == ["master"]


def test_json_object_body_equals_yaml(clean_yaml: str, seed_yaml: str) -> None:
    for text in (clean_yaml, seed_yaml):
        assert parse_job_spec_obj(yaml.safe_load(text)) == parse_job_spec(text)


@pytest.mark.parametrize("which", ["seed", "clean", "minimal"])
def test_yaml_round_trip(which: str, request: pytest.FixtureRequest) -> None:
    spec = parse_job_spec(request.getfixturevalue(f"{which}_yaml"))
    text = spec_to_yaml(spec)
    assert parse_job_spec(text) == spec
    assert parse_job_spec_obj(spec_to_dict(spec)) == spec


def test_spec_to_yaml_is_the_clean_form(seed_yaml: str) -> None:
    data = yaml.safe_load(spec_to_yaml(parse_job_spec(seed_yaml)))
    assert list(data) == [
        "name",
        "type",
        "priority",
        "preemptible",
        "reduceCost",
        "expectedDuration",
        "roles",
    ]
    assert data["roles"][1] == {
        "name": "worker",
        "image": "vacant.io/training-worker:1.0",
        "replicas": {"min": 9, "max": 40},
        "sharing": "exclusive",
        "resources": {"gpu": 1, "cpu": 1, "memory": "4Gi"},
        "vendor": "any",
    }


def test_round_trip_of_every_sharing_mode() -> None:
    roles = [
        {"name": "master", "image": "i:1", "resources": {"gpu": 0, "cpu": "250m", "memory": "300Mi"}},
        {
            "name": "worker",
            "image": "i:1",
            "sharing": "mig",
            "resources": {"mig": "2g.20gb"},
            "env": {"A": 1, "B": "yes"},
            "command": "run.sh",
        },
    ]
    for sharing, resources in [("fraction", {"gpu": 0.33}), ("timeslice", {}), ("exclusive", {"gpu": 4})]:
        spec = parse_job_spec_obj(
            {
                "name": "j",
                "type": "pytorch",
                "expectedDuration": "1d2h3m4s",
                "queue": "q",
                "roles": [roles[0], roles[1] | {"sharing": sharing, "resources": resources}],
            }
        )
        assert parse_job_spec(spec_to_yaml(spec)) == spec
    spec = parse_job_spec_obj({"name": "j", "type": "pytorch", "roles": roles})
    assert spec.roles[1].env == (("A", "1"), ("B", "yes"))
    assert spec.roles[1].command == ("run.sh",)
    assert parse_job_spec(spec_to_yaml(spec)) == spec


def test_yaml_merge_keys_and_a_few_aliases_are_fine() -> None:
    # A merge key brings in role defaults; explicit keys win.
    text = (
        "name: j\ntype: pytorch\nroles:\n"
        "  - &base {name: master, image: 'img:1', resources: {gpu: 2}}\n"
        "  - <<: *base\n    name: worker\n    replicas: 4\n"
    )
    spec = parse_job_spec(text)
    assert [(r.name, r.image, r.num_gpus, r.max_replicas) for r in spec.roles] == [
        ("master", "img:1", 2, 1),
        ("worker", "img:1", 2, 4),
    ]


def test_image_form_with_text_values() -> None:
    spec = spec_from_image_form(
        {
            "image": "registry.io/team/Train_Job:1.0",
            "gpus": "0.5",
            "sharing": "fraction",
            "minReplicas": "1",
            "maxReplicas": "3",
            "priority": "10",
            "reduceCost": "on",
            "gpuMemory": "",
            "command": "python 'a b.py'",
        }
    )
    assert spec.name == "train-job"  # derived from the image
    assert (spec.type, spec.priority, spec.reduce_cost, spec.preemptible) == ("single", 10, True, True)
    (role,) = spec.roles
    assert (role.image, role.sharing, role.gpu_milli, role.min_replicas, role.max_replicas) == (
        "registry.io/team/Train_Job:1.0",
        "fraction",
        500,
        1,
        3,
    )
    assert role.command == ("python", "a b.py")
    yaml_text = spec_to_yaml(spec)
    assert "gpu: 0.5" in yaml_text
    assert parse_job_spec(yaml_text) == spec


def test_image_form_defaults_and_native_values() -> None:
    spec = spec_from_image_form({"image": "busybox", "gpus": 2, "reduceCost": False, "name": "mine"})
    assert spec.name == "mine"
    assert (spec.roles[0].num_gpus, spec.roles[0].sharing) == (2, "exclusive")
    assert spec_from_image_form({"image": "busybox", "mig": "1g.10gb"}).roles[0].sharing == "mig"


def test_image_form_errors_name_form_fields() -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_image_form(
            {"image": "not an image", "gpus": "1.5", "sharing": "exclusive", "maxReplicas": "0"}
        )
    fields = {e.field for e in caught.value.errors}
    assert fields == {"image", "gpus", "maxReplicas"}
    assert all(e.line is None for e in caught.value.errors)
    messages = str(caught.value)
    assert "gpus (1.5) must be a whole number of GPUs" in messages
    assert "maxReplicas (0) must be from 1 to 1024" in messages


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"image": "i", "gpus": "lots"}, "gpus", "gpus: 'lots' is not a number of GPUs"),
        ({"image": "i", "gpus": "Infinity"}, "gpus", "gpus: 'Infinity' is not a number of GPUs"),
        ({"image": "i", "gpus": "NaN"}, "gpus", "gpus: 'NaN' is not a number of GPUs"),
        ({"image": "i", "priority": "high"}, "priority", "priority: 'high' is not a whole number"),
        ({"image": "i", "reduceCost": "maybe"}, "reduceCost", "reduceCost: 'maybe' is not true or false"),
        ({"image": "i", "command": "python 'x"}, "command", "command: cannot split the command"),
        ({"image": "i", "colour": "red"}, "colour", "colour: unknown form field 'colour'"),
        ({"gpus": "1"}, "image", "image is required"),
    ],
)
def test_image_form_bad_values(form: dict, field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_image_form(form)
    (error,) = caught.value.errors
    assert error.field == field
    assert message in error.message
