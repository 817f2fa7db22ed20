"""Every error path of the spec readers, with its exact message, field, line and column."""

from __future__ import annotations

import pytest

from scheduling.spec import SpecError, SpecIssue, parse_job_spec, parse_job_spec_obj

R = "name: j\nroles:\n  - name: main\n    image: img:1\n"  # a valid clean spec to append role fields to

CASES = [
    pytest.param(
        'name: "job\\n"\nroles: [{name: a, image: i}]\n',
        [
            (
                1,
                7,
                "name",
                "name 'job\\n' is not valid: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit",
            )
        ],
        id="name_trailing_newline",
    ),
    pytest.param(
        'name: ""\nroles: [{name: a, image: i}]\n',
        [(1, 7, "name", "name is empty")],
        id="name_empty",
    ),
    pytest.param(
        "name: j\nnmae: x\nroles: [{name: a, image: i}]\n",
        [(2, 1, "nmae", "unknown field 'nmae' in the job; did you mean 'name'?")],
        id="unknown_close",
    ),
    pytest.param(
        "name: j\ncolour: red\nroles: [{name: a, image: i}]\n",
        [
            (
                2,
                1,
                "colour",
                "unknown field 'colour' in the job (allowed: name, type, queue, priority, preemptible, reduceCost, expectedDuration, roles, checkpointPath, topology, kind, after, array, maxRuntime, retry, ttlAfterFinished, checkpoint, terminationGracePeriod, completeBy, completeWithin, tensorboard)",
            )
        ],
        id="unknown_far",
    ),
    pytest.param(
        "roles: [{name: a, image: i}]\n",
        [(1, 1, "name", "name is required")],
        id="name_missing",
    ),
    pytest.param(
        "name: My_Job\nroles: [{name: a, image: i}]\n",
        [
            (
                1,
                7,
                "name",
                "name 'My_Job' is not valid: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit",
            )
        ],
        id="name_bad",
    ),
    pytest.param(
        "name: j\ntype: PyTorch\nroles: [{name: worker, image: i}]\n",
        [(2, 7, "type", "type 'PyTorch' is not one of single | pytorch | mpi; did you mean 'pytorch'?")],
        id="type_bad",
    ),
    pytest.param(
        "name: j\ntype: tensorflow\nroles: [{name: worker, image: i}]\n",
        [(2, 7, "type", "type 'tensorflow' is not one of single | pytorch | mpi")],
        id="type_far",
    ),
    pytest.param(
        R + "queue: Vision Lab\n",
        [
            (
                5,
                8,
                "queue",
                "queue 'Vision Lab' is not valid: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit",
            )
        ],
        id="queue_bad",
    ),
    pytest.param(
        R + "priority: high\n",
        [(5, 11, "priority", "priority must be a whole number from 0 to 100, not 'high'")],
        id="prio_text",
    ),
    pytest.param(
        R + "priority: 101\n",
        [(5, 11, "priority", "priority (101) must be from 0 to 100")],
        id="prio_range",
    ),
    pytest.param(
        R + "priority: 2.5\n",
        [(5, 11, "priority", "priority must be a whole number from 0 to 100, not 2.5")],
        id="prio_float",
    ),
    pytest.param(
        R + "reduceCost: maybe\n",
        [(5, 13, "reduceCost", "reduceCost must be true or false, not 'maybe'")],
        id="reduce_bad",
    ),
    pytest.param(
        R + "reduceCost: true\npreemptible: false\n",
        [
            (
                6,
                14,
                "preemptible",
                "preemptible: false conflicts with reduceCost: true (reduced-cost work can always be preempted)",
            )
        ],
        id="preempt_conflict",
    ),
    pytest.param(
        R + "expectedDuration: 90\n",
        [(5, 19, "expectedDuration", "expectedDuration 90 has no unit; write e.g. 30m, 2h or 1d")],
        id="dur_nounit",
    ),
    pytest.param(
        R + "expectedDuration: soon\n",
        [
            (
                5,
                19,
                "expectedDuration",
                "expectedDuration 'soon' is not a duration (e.g. 30m, 2h, 1d or 1h30m)",
            )
        ],
        id="dur_bad",
    ),
    pytest.param(
        R + "expectedDuration: 100d\n",
        [(5, 19, "expectedDuration", "expectedDuration '100d' is longer than 90d")],
        id="dur_long",
    ),
    pytest.param(
        R + "expectedDuration: 1h1h\n",
        [
            (
                5,
                19,
                "expectedDuration",
                "expectedDuration '1h1h' is not a duration (e.g. 30m, 2h, 1d or 1h30m)",
            )
        ],
        id="dur_dup",
    ),
    pytest.param(
        R + "checkpointPath: [a]\n",
        [(5, 17, "checkpointPath", "checkpointPath must be text, not a list")],
        id="ckpt_list",
    ),
    pytest.param(
        "name: j\n",
        [(1, 1, "roles", "roles is required: a list of roles (name, image, replicas, resources)")],
        id="roles_missing",
    ),
    pytest.param(
        "name: j\nroles: {name: a}\n",
        [(2, 8, "roles", "roles must be a list of roles, not a mapping")],
        id="roles_notlist",
    ),
    pytest.param(
        "name: j\nroles: []\n",
        [(2, 8, "roles", "roles is empty; give at least one role")],
        id="roles_empty",
    ),
    pytest.param(
        "name: j\ntype: mpi\nroles: [{name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}, {name: worker, image: i}]\n",
        [(3, 8, "roles", "roles has 9 entries; at most 8")],
        id="roles_many",
    ),
    pytest.param(
        "name: j\nroles: [worker]\n",
        [
            (
                2,
                9,
                "roles[0]",
                "roles[0] must be a mapping of role fields (name, image, replicas, resources), not 'worker'",
            )
        ],
        id="role_notmap",
    ),
    pytest.param(
        R + "    imgae: x\n",
        [(5, 5, "roles[0].imgae", "unknown field 'imgae' in a role; did you mean 'image'?")],
        id="role_unknown",
    ),
    pytest.param(
        "name: j\nroles:\n  - image: i\n",
        [(3, 5, "roles[0].name", "roles[0].name is required")],
        id="role_name_missing",
    ),
    pytest.param(
        "name: j\nroles:\n  - name: a\n",
        [(3, 5, "roles[0].image", "roles[0].image is required")],
        id="role_image_missing",
    ),
    pytest.param(
        "name: j\nroles:\n  - name: a\n    image: my image\n",
        [
            (
                4,
                12,
                "roles[0].image",
                "roles[0].image 'my image' is not valid: an image reference such as registry.io/team/train:1.0",
            )
        ],
        id="role_image_bad",
    ),
    pytest.param(
        R + "    command: [python, 3]\n",
        [(5, 14, "roles[0].command", 'roles[0].command must be a list of text, e.g. ["python", "train.py"]')],
        id="command_bad",
    ),
    pytest.param(
        R + "    env: [A=1]\n",
        [(5, 10, "roles[0].env", "roles[0].env must be a mapping of variable names to values, not a list")],
        id="env_notmap",
    ),
    pytest.param(
        R + "    env: {1A: x}\n",
        [
            (
                5,
                11,
                "roles[0].env.1A",
                "env name '1A' must be letters, digits and '_', not starting with a digit",
            )
        ],
        id="env_badname",
    ),
    pytest.param(
        R + "    env: {DEBUG: true}\n",
        [(5, 18, "roles[0].env.DEBUG", "roles[0].env.DEBUG must be text, not true (quote it)")],
        id="env_badval",
    ),
    pytest.param(
        R + "    replicas: many\n",
        [
            (
                5,
                15,
                "roles[0].replicas",
                "roles[0].replicas must be a mapping of min and max, e.g. {min: 1, max: 4}, not 'many'",
            )
        ],
        id="replicas_bad",
    ),
    pytest.param(
        R + "    replicas: {min: 1, maximum: 3}\n",
        [
            (
                5,
                24,
                "roles[0].replicas.maximum",
                "unknown field 'maximum' in roles[0].replicas; did you mean 'max'?",
            )
        ],
        id="replicas_unknown",
    ),
    pytest.param(
        R + "    replicas: {min: -1, max: 3}\n",
        [(5, 21, "roles[0].replicas.min", "roles[0].replicas.min (-1) must be from 0 to 1024")],
        id="replicas_neg",
    ),
    pytest.param(
        R + "    replicas: {max: 0}\n",
        [(5, 21, "roles[0].replicas.max", "roles[0].replicas.max (0) must be from 1 to 1024")],
        id="replicas_max0",
    ),
    pytest.param(
        R + "    replicas: {min: 10, max: 5}\n",
        [
            (
                5,
                30,
                "roles[0].replicas.max",
                "roles[0].replicas.max (5) is less than roles[0].replicas.min (10)",
            )
        ],
        id="replicas_order",
    ),
    pytest.param(
        R + "    vendor: intel\n",
        [(5, 13, "roles[0].vendor", "roles[0].vendor 'intel' is not one of nvidia | amd | any")],
        id="vendor_bad",
    ),
    pytest.param(
        "name: j\nroles:\n  - name: main\n    image: img:1\n    gpuModel: '@@'\n",
        [(5, 15, "roles[0].gpuModel", "roles[0].gpuModel '@@' is not valid: a GPU model such as A100-80GB")],
        id="model_bad",
    ),
    pytest.param(
        R + "    nodePool: A100_Spot\n",
        [
            (
                5,
                15,
                "roles[0].nodePool",
                "roles[0].nodePool 'A100_Spot' is not valid: lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit",
            )
        ],
        id="pool_bad",
    ),
    pytest.param(
        R + "    resources: 2\n",
        [
            (
                5,
                16,
                "roles[0].resources",
                "roles[0].resources must be a mapping of gpu, gpuMemory, cpu, memory, mig, not 2",
            )
        ],
        id="res_notmap",
    ),
    pytest.param(
        R + "    resources: {gpus: 2}\n",
        [
            (
                5,
                17,
                "roles[0].resources.gpus",
                "unknown field 'gpus' in roles[0].resources; did you mean 'gpu'?",
            )
        ],
        id="res_unknown",
    ),
    pytest.param(
        R + "    resources: {gpu: two}\n",
        [
            (
                5,
                22,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu 'two' is not a number of GPUs (e.g. 1, 2 or 0.5)",
            )
        ],
        id="gpu_text",
    ),
    pytest.param(
        R + "    resources: {gpu: -1}\n",
        [(5, 22, "roles[0].resources.gpu", "roles[0].resources.gpu -1 must not be negative")],
        id="gpu_neg",
    ),
    pytest.param(
        R + "    resources: {gpu: true}\n",
        [
            (
                5,
                22,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu true is not a number of GPUs (e.g. 1, 2 or 0.5)",
            )
        ],
        id="gpu_bool",
    ),
    pytest.param(
        R + "    resources: {gpu: 1, gpuMemory: 10Gi}\n",
        [
            (
                5,
                36,
                "roles[0].resources.gpuMemory",
                "roles[0].resources.gpuMemory applies only to roles[0].sharing fraction (whole GPUs come with all their memory)",
            )
        ],
        id="gpumem_excl",
    ),
    pytest.param(
        R + "    resources: {gpu: 0.5, gpuMemory: 10gb}\n",
        [
            (
                5,
                38,
                "roles[0].resources.gpuMemory",
                "roles[0].resources.gpuMemory '10gb' uses an unknown unit; write 10Gi (Ki, Mi, Gi, Ti)",
            )
        ],
        id="gpumem_unit",
    ),
    pytest.param(
        R + "    resources: {mig: 3g.40}\n",
        [
            (
                5,
                22,
                "roles[0].resources.mig",
                "roles[0].resources.mig '3g.40' is not valid: a MIG profile such as 3g.40gb or 1g.10gb",
            )
        ],
        id="mig_pattern",
    ),
    pytest.param(
        R + "    sharing: exclusive\n    resources: {mig: 3g.40gb}\n",
        [
            (
                6,
                22,
                "roles[0].resources.mig",
                "roles[0].resources.mig needs roles[0].sharing mig, not exclusive",
            )
        ],
        id="mig_wrong_sharing",
    ),
    pytest.param(
        R + "    sharing: mig\n",
        [
            (
                3,
                5,
                "roles[0].resources.mig",
                "roles[0].resources.mig is required with roles[0].sharing mig (e.g. 3g.40gb)",
            )
        ],
        id="mig_missing",
    ),
    pytest.param(
        R + "    resources: {mig: 3g.40gb, gpu: 2}\n",
        [
            (
                5,
                36,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu (2) must be 1 or left out with roles[0].sharing mig (one MIG instance per replica)",
            )
        ],
        id="mig_gpu2",
    ),
    pytest.param(
        R + "    vendor: amd\n    resources: {mig: 3g.40gb}\n",
        [
            (
                6,
                22,
                "roles[0].resources.mig",
                "roles[0].resources.mig: MIG is an NVIDIA feature; vendor amd cannot use it",
            )
        ],
        id="mig_amd",
    ),
    pytest.param(
        R + "    sharing: exclusive\n    resources: {gpu: 1.5}\n",
        [
            (
                6,
                22,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu (1.5) must be a whole number of GPUs with roles[0].sharing exclusive; use sharing: fraction for part of a GPU",
            )
        ],
        id="excl_frac",
    ),
    pytest.param(
        R + "    resources: {gpu: 100}\n",
        [(5, 22, "roles[0].resources.gpu", "roles[0].resources.gpu (100) is more than 64 GPUs per replica")],
        id="excl_many",
    ),
    pytest.param(
        R + "    sharing: fraction\n",
        [
            (
                3,
                5,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu is required with roles[0].sharing fraction (e.g. 0.5)",
            )
        ],
        id="frac_missing",
    ),
    pytest.param(
        R + "    sharing: fraction\n    resources: {gpu: 1.5}\n",
        [
            (
                6,
                22,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu (1.5) must be between 0.01 and 0.99 with roles[0].sharing fraction; use sharing: exclusive for whole GPUs",
            )
        ],
        id="frac_big",
    ),
    pytest.param(
        R + "    resources: {gpu: 0.005}\n",
        [(5, 22, "roles[0].resources.gpu", "roles[0].resources.gpu (0.005) must be in steps of 0.01")],
        id="frac_step",
    ),
    pytest.param(
        R + "    sharing: timeslice\n    resources: {gpu: 2}\n",
        [
            (
                6,
                22,
                "roles[0].resources.gpu",
                "roles[0].resources.gpu (2) must be 1 or left out with roles[0].sharing timeslice (one time-sliced GPU per replica)",
            )
        ],
        id="ts_gpu2",
    ),
    pytest.param(
        R + "    sharing: timeslice\n    resources: {gpuMemory: 4Gi}\n",
        [
            (
                6,
                28,
                "roles[0].resources.gpuMemory",
                "roles[0].resources.gpuMemory applies only to roles[0].sharing fraction (time-slicing has no memory isolation)",
            )
        ],
        id="ts_mem",
    ),
    pytest.param(
        R + "    resources: {cpu: lots}\n",
        [
            (
                5,
                22,
                "roles[0].resources.cpu",
                "roles[0].resources.cpu 'lots' is not a CPU amount (e.g. 4, 0.5 or 500m)",
            )
        ],
        id="cpu_bad",
    ),
    pytest.param(
        R + "    resources: {cpu: 0}\n",
        [(5, 22, "roles[0].resources.cpu", "roles[0].resources.cpu 0 must be more than 0")],
        id="cpu_zero",
    ),
    pytest.param(
        "name: j\nroles:\n  - name: main\n    image: img:1\n    resources: {cpu: '0.0001'}\n",
        [
            (
                5,
                22,
                "roles[0].resources.cpu",
                "roles[0].resources.cpu '0.0001' is finer than 1m (one thousandth of a CPU)",
            )
        ],
        id="cpu_fine",
    ),
    pytest.param(
        R + "    resources: {memory: 16}\n",
        [
            (
                5,
                25,
                "roles[0].resources.memory",
                "roles[0].resources.memory 16 has no unit; write e.g. 16Gi or 512Mi",
            )
        ],
        id="mem_nounit",
    ),
    pytest.param(
        R + "    resources: {memory: 16GB}\n",
        [
            (
                5,
                25,
                "roles[0].resources.memory",
                "roles[0].resources.memory '16GB' uses an unknown unit; write 16Gi (Ki, Mi, Gi, Ti)",
            )
        ],
        id="mem_gb",
    ),
    pytest.param(
        R + "    sharing: shared\n",
        [
            (
                5,
                14,
                "roles[0].sharing",
                "roles[0].sharing 'shared' is not one of exclusive | fraction | mig | timeslice",
            )
        ],
        id="sharing_bad",
    ),
    pytest.param(
        "name: j\ntype: pytorch\nroles:\n  - {name: worker, image: i}\n  - {name: worker, image: i}\n",
        [(5, 12, "roles[1].name", "role name 'worker' is used twice (also roles[0])")],
        id="dup_role",
    ),
    pytest.param(
        "name: j\ntype: pytorch\nroles:\n  - {name: launcher, image: i}\n",
        [(4, 12, "roles[0].name", "a pytorch job has roles named 'master' and 'worker', not 'launcher'")],
        id="pt_rolename",
    ),
    pytest.param(
        "name: j\nroles:\n  - {name: a, image: i}\n  - {name: b, image: i}\n",
        [(3, 3, "roles", "a single job has exactly one role, not 2; use type pytorch or mpi")],
        id="single_two",
    ),
    pytest.param(
        "name: j\nroles:\n  - {name: a, image: i, replicas: {min: 0, max: 2}}\n",
        [(3, 3, "roles", "every role has replicas.min 0; at least one replica must start")],
        id="all_min0",
    ),
    pytest.param(
        "TaskType: MPI\nTaskImage: i\n",
        [(1, 1, "TaskName", "TaskName is required")],
        id="seed_name_missing",
    ),
    pytest.param(
        "TaskName: t\nTaskType: TensorFlow\nTaskImage: i\n",
        [(2, 11, "TaskType", "TaskType 'TensorFlow' is not one of MPI | PyTorch | other")],
        id="seed_type_bad",
    ),
    pytest.param(
        "TaskName: t\nTaskImage: i\ntaskimage: j\nQueue: q\n",
        [
            (3, 1, "taskimage", "unknown field 'taskimage' in the task; did you mean 'TaskImage'?"),
            (
                4,
                1,
                "Queue",
                "unknown field 'Queue' in the task (allowed: TaskName, Priority, TaskType, MinReplicas, MaxReplicas, AMDSupport, ReduceCost, TaskImage, MasterImage, WorkerImage, MasterMaxReplicas, WorkerMaxReplicas)",
            ),
        ],
        id="seed_unknown",
    ),
    pytest.param(
        "TaskName: t\nTaskImage: i\nMasterImage: m\n",
        [(3, 1, "MasterImage", "MasterImage applies only to TaskType MPI or PyTorch")],
        id="seed_single_master",
    ),
    pytest.param(
        "TaskName: t\n",
        [(1, 1, "TaskImage", "TaskImage is required")],
        id="seed_single_noimage",
    ),
    pytest.param(
        "TaskName: t\nTaskType: MPI\n",
        [
            (1, 1, "MasterImage", "MasterImage (or TaskImage for both roles) is required for TaskType MPI"),
            (1, 1, "WorkerImage", "WorkerImage (or TaskImage for both roles) is required for TaskType MPI"),
        ],
        id="seed_mpi_noimages",
    ),
    pytest.param(
        "TaskName: t\nTaskType: MPI\nTaskImage: i\nMinReplicas: 10\nMaxReplicas: 20\nWorkerMaxReplicas: 5\n",
        [
            (
                6,
                20,
                "WorkerMaxReplicas",
                "WorkerMaxReplicas (5) is less than the 9 workers that MinReplicas (10) needs besides the master",
            )
        ],
        id="seed_worker_cap",
    ),
    pytest.param(
        "TaskName: t\nTaskType: MPI\nTaskImage: i\nMasterMaxReplicas: 0\n",
        [(4, 20, "MasterMaxReplicas", "MasterMaxReplicas (0) must be from 1 to 1024")],
        id="seed_master0",
    ),
    pytest.param(
        "TaskName: t\nTaskImage: i\nAMDSupport: yes please\n",
        [(3, 13, "AMDSupport", "AMDSupport must be true or false, not 'yes please'")],
        id="seed_amd_bad",
    ),
    pytest.param(
        "TaskName: t\nTaskImage: i\nMinReplicas: 0\n",
        [(3, 14, "MinReplicas", "MinReplicas (0) must be from 1 to 1024")],
        id="seed_min0",
    ),
    pytest.param(
        "TaskName: t\nname: x\n",
        [
            (
                2,
                1,
                "name",
                "the spec mixes task-form fields (TaskName) with clean-form fields (name); use one form",
            )
        ],
        id="mixed",
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_error_message(text: str, expected: list[tuple]) -> None:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    assert [(e.line, e.column, e.field, e.message) for e in caught.value.errors] == expected


def test_seed_max_below_min_names_line_and_column(seed_yaml: str) -> None:
    text = seed_yaml.replace("MaxReplicas: 50", "MaxReplicas: 5")
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    assert str(caught.value) == "line 8, col 14: MaxReplicas (5) is less than MinReplicas (10)"
    assert caught.value.to_dicts() == [
        {
            "line": 8,
            "column": 14,
            "field": "MaxReplicas",
            "message": "MaxReplicas (5) is less than MinReplicas (10)",
        }
    ]


def test_all_errors_come_at_once_in_document_order() -> None:
    text = (
        "name: Bad Name\n"
        "priority: 500\n"
        "roles:\n"
        "  - name: worker\n"
        "    image: img:1\n"
        "    replicas: {min: 4, max: 2}\n"
        "    resources: {gpu: 0.5, cpu: lots, memory: 16}\n"
        "    sharing: exclusive\n"
        "expectedDuration: forever\n"
    )
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    located = [(e.line, e.field) for e in caught.value.errors]
    assert located == [
        (1, "name"),
        (2, "priority"),
        (6, "roles[0].replicas.max"),
        (7, "roles[0].resources.gpu"),
        (7, "roles[0].resources.cpu"),
        (7, "roles[0].resources.memory"),
        (9, "expectedDuration"),
    ]
    lines = str(caught.value).splitlines()
    assert lines[0].startswith("line 1, col 7: name 'Bad Name' is not valid")
    assert len(lines) == 7


def test_clean_form_errors_in_json_object_have_no_position() -> None:
    with pytest.raises(SpecError) as caught:
        parse_job_spec_obj(
            {"name": "j", "priority": -1, "roles": [{"name": "a", "image": "i", "vendor": "arm"}]}
        )
    assert [e.to_dict() for e in caught.value.errors] == [
        {"line": None, "column": None, "field": "priority", "message": "priority (-1) must be from 0 to 100"},
        {
            "line": None,
            "column": None,
            "field": "roles[0].vendor",
            "message": "roles[0].vendor 'arm' is not one of nvidia | amd | any; did you mean 'amd'?",
        },
    ]


def test_missing_field_without_position_is_prefixed_with_its_name() -> None:
    with pytest.raises(SpecError) as caught:
        parse_job_spec_obj({"roles": [{"name": "a", "image": "i", "env": {"9": "x"}}]})
    assert [str(e) for e in caught.value.errors] == [
        "name is required",
        "roles[0].env.9: env name '9' must be letters, digits and '_', not starting with a digit",
    ]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([1, 2], "the spec must be a JSON object of fields, not list"),
        ({"name": "j", 3: "x"}, "the spec: keys must be text"),
        ({"name": "j", "roles": [{"image": {1, 2}}]}, "roles[0].image: set is not a JSON value"),
        ({"name": "j", "priority": 10**30}, "priority: the number is too large"),
        (
            {"name": "j", "roles": [{"name": "a", "image": "i", "resources": {"gpu": float("nan")}}]},
            "roles[0].resources.gpu nan is not a number of GPUs (e.g. 1, 2 or 0.5)",
        ),
    ],
)
def test_json_object_bad_values(obj: object, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_job_spec_obj(obj)  # type: ignore[arg-type]
    assert message in [e.message for e in caught.value.errors]


def test_spec_issue_str_and_error_sorting() -> None:
    late, early, loose = (
        SpecIssue(9, 2, "a", "late"),
        SpecIssue(1, 5, "b", "early"),
        SpecIssue(None, None, None, "x"),
    )
    error = SpecError([loose, late, early])
    assert error.errors == [early, late, loose]
    assert str(error) == "line 1, col 5: early\nline 9, col 2: late\nx"


def test_misspelt_task_form_gets_task_form_hints() -> None:
    with pytest.raises(SpecError) as caught:
        parse_job_spec("taskname: t\ntaskimage: i\n")
    assert [e.message for e in caught.value.errors] == [
        "unknown field 'taskname' in the task; did you mean 'TaskName'?",
        "TaskName is required",
        "TaskImage is required",
        "unknown field 'taskimage' in the task; did you mean 'TaskImage'?",
    ]
