"""Specs that no pool of the cluster can run are rejected with the reason, at the right field."""

from __future__ import annotations

import pytest

from scheduling.spec import (
    ClusterInfo,
    PoolInfo,
    SpecError,
    parse_job_spec,
    spec_from_image_form,
    validate_spec,
)

R = "name: j\nroles:\n  - name: main\n    image: img:1\n"


def errors_of(text: str, cluster: ClusterInfo, queues: frozenset[str] | None = None) -> list[tuple]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text, cluster=cluster, workspace_queues=queues)
    return [(e.line, e.column, e.field, e.message) for e in caught.value.errors]


def test_seed_and_clean_example_fit_the_test_world(
    seed_yaml: str, clean_yaml: str, world_pools: ClusterInfo, vision_queues: frozenset[str]
) -> None:
    assert parse_job_spec(seed_yaml, cluster=world_pools, workspace_queues=vision_queues).name == "training1"
    assert (
        parse_job_spec(clean_yaml, cluster=world_pools, workspace_queues=vision_queues).queue == "vision-lab"
    )


@pytest.mark.parametrize(
    "role_fields",
    [
        "    resources: {mig: 3g.40gb}\n",
        "    nodePool: h100-mig\n    resources: {mig: 1g.10gb}\n",
        "    sharing: timeslice\n",
        "    nodePool: l40s-shared\n    sharing: timeslice\n    vendor: any\n",
        "    vendor: amd\n    resources: {gpu: 8}\n",
        "    vendor: any\n    resources: {gpu: 0.5, gpuMemory: 150Gi}\n",  # only MI300X has that much
        "    gpuModel: rtx-4090-24gb\n    resources: {gpu: 2}\n",  # model names match ignoring case
        "    nodePool: rtx4090\n    resources: {gpu: 0}\n",  # CPU-only
    ],
)
def test_specs_that_fit(role_fields: str, world_pools: ClusterInfo) -> None:
    parse_job_spec(R + role_fields, cluster=world_pools)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            R + "queue: nlp-group\n",
            (5, 8, "queue", "queue 'nlp-group' is not open to this workspace (open: community, vision-lab)"),
            id="queue-not-open",
        ),
        pytest.param(
            R + "queue: vision-lb\n",
            (
                5,
                8,
                "queue",
                "queue 'vision-lb' is not open to this workspace; did you mean 'vision-lab'? (open: community, vision-lab)",
            ),
            id="queue-typo",
        ),
        pytest.param(
            R + "    resources: {mig: 3g.20gb}\n",
            (
                5,
                22,
                "roles[0].resources.mig",
                "role 'main': MIG profile 3g.20gb is offered by no pool (offered: 1g.10gb, 2g.20gb, 3g.40gb)",
            ),
            id="mig-profile-nowhere",
        ),
        pytest.param(
            R + "    nodePool: h100\n    resources: {mig: 3g.40gb}\n",
            (
                6,
                22,
                "roles[0].resources.mig",
                "role 'main': nodePool 'h100' does not offer sharing 'mig' (offered: exclusive, fraction)",
            ),
            id="mig-on-non-mig-pool",
        ),
        pytest.param(
            R + "    nodePool: mi300x\n",
            (
                5,
                15,
                "roles[0].nodePool",
                "role 'main': nodePool 'mi300x' has only AMD GPUs and this job does not allow AMD "
                "(set vendor: any or amd; AMDSupport: true in the task form)",
            ),
            id="amd-pool-without-amd-support",
        ),
        pytest.param(
            R + "    vendor: nvidia\n    gpuModel: MI300X-192GB\n",
            (
                5,
                13,
                "roles[0].vendor",
                "role 'main': gpuModel 'MI300X-192GB' has only AMD GPUs and this job does not allow AMD "
                "(set vendor: any or amd; AMDSupport: true in the task form)",
            ),
            id="amd-model-without-amd-support",
        ),
        pytest.param(
            R + "    resources: {gpu: 16}\n",
            (
                5,
                22,
                "roles[0].resources.gpu",
                "role 'main': 16 GPUs per replica is more than any node has (at most 8 per node)",
            ),
            id="too-many-gpus",
        ),
        pytest.param(
            R + "    nodePool: rtx4090\n    resources: {gpu: 4}\n",
            (
                6,
                22,
                "roles[0].resources.gpu",
                "role 'main': 4 GPUs per replica is more than any node has (at most 2 per node)",
            ),
            id="too-many-gpus-in-pool",
        ),
        pytest.param(
            R + "    resources: {gpu: 0.5, gpuMemory: 100Gi}\n",
            (
                5,
                38,
                "roles[0].resources.gpuMemory",
                "role 'main': gpuMemory 100Gi is larger than any GPU (the largest has 80Gi)",
            ),
            id="fraction-memory-too-large",
        ),
        pytest.param(
            R + "    nodePool: a100spot\n",
            (
                5,
                15,
                "roles[0].nodePool",
                "role 'main': nodePool 'a100spot' does not exist; did you mean 'a100-spot'? "
                "(pools: a100-spot, h100, h100-mig, l40s-shared, mi300x, rtx4090)",
            ),
            id="unknown-pool",
        ),
        pytest.param(
            R + "    gpuModel: A100-40GB\n",
            (
                5,
                15,
                "roles[0].gpuModel",
                "role 'main': gpuModel 'A100-40GB' is in no pool; did you mean 'A100-80GB'? "
                "(models: A100-80GB, H100-80GB, L40S-48GB, MI300X-192GB, RTX-4090-24GB)",
            ),
            id="unknown-model",
        ),
        pytest.param(
            R + "    nodePool: h100\n    gpuModel: A100-80GB\n",
            (6, 15, "roles[0].gpuModel", "role 'main': nodePool 'h100' has H100-80GB GPUs, not A100-80GB"),
            id="pool-model-mismatch",
        ),
        pytest.param(
            R + "    nodePool: h100\n    sharing: timeslice\n",
            (
                6,
                14,
                "roles[0].sharing",
                "role 'main': nodePool 'h100' does not offer sharing 'timeslice' (offered: exclusive, fraction)",
            ),
            id="sharing-not-offered",
        ),
        pytest.param(
            R + "    gpuModel: L40S-48GB\n    resources: {gpu: 0.5}\n",
            (
                6,
                22,
                "roles[0].resources.gpu",
                "role 'main': no pool with gpuModel 'L40S-48GB' offers sharing 'fraction' (offered: timeslice)",
            ),
            id="model-without-sharing",
        ),
    ],
)
def test_cluster_rejections(
    text: str, expected: tuple, world_pools: ClusterInfo, vision_queues: frozenset[str]
) -> None:
    assert errors_of(text, world_pools, vision_queues) == [expected]


def test_seed_without_amd_support_on_an_amd_only_cluster(seed_yaml: str, world_pools: ClusterInfo) -> None:
    amd_only = ClusterInfo(tuple(p for p in world_pools.pools if p.vendor == "amd"))
    parse_job_spec(seed_yaml, cluster=amd_only)  # AMDSupport: true runs there
    errors = errors_of(seed_yaml.replace("AMDSupport: true", "AMDSupport: false"), amd_only)
    assert [(line, col, field) for line, col, field, _ in errors] == [(11, 13, "AMDSupport")] * 2
    assert errors[0][3].startswith(
        "role 'master': the cluster has only AMD GPUs and this job does not allow AMD"
    )


def test_amd_job_on_an_nvidia_only_cluster(world_pools: ClusterInfo) -> None:
    nvidia_only = ClusterInfo(tuple(p for p in world_pools.pools if p.vendor == "nvidia"))
    assert errors_of(R + "    vendor: amd\n", nvidia_only) == [
        (5, 13, "roles[0].vendor", "role 'main': no pool that matches has AMD GPUs (found NVIDIA)")
    ]


def test_empty_cluster_runs_cpu_only_roles_only() -> None:
    empty = ClusterInfo(pools=())
    parse_job_spec(R + "    resources: {gpu: 0}\n", cluster=empty)
    assert errors_of(R, empty) == [
        (3, 5, "roles[0].resources.gpu", "role 'main': the cluster has no GPU pools")
    ]


def test_every_role_is_checked(world_pools: ClusterInfo) -> None:
    text = (
        "name: j\ntype: pytorch\nroles:\n"
        "  - {name: master, image: 'i:1', nodePool: nowhere}\n"
        "  - {name: worker, image: 'i:1', resources: {gpu: 9}}\n"
    )
    assert [(line, field) for line, _, field, _ in errors_of(text, world_pools)] == [
        (4, "roles[0].nodePool"),
        (5, "roles[1].resources.gpu"),
    ]


def test_validate_spec_rechecks_a_parsed_spec(clean_yaml: str, world_pools: ClusterInfo) -> None:
    spec = parse_job_spec(clean_yaml)
    assert validate_spec(spec, cluster=world_pools, workspace_queues={"vision-lab"}) == []
    smaller = ClusterInfo(tuple(p for p in world_pools.pools if p.name != "a100-spot"))
    issues = validate_spec(spec, cluster=smaller, workspace_queues={"nlp-group"})
    assert [(i.line, i.field) for i in issues] == [(None, "queue"), (None, "roles[0].nodePool")]
    assert issues[1].message.startswith(
        "roles[0].nodePool: role 'worker': nodePool 'a100-spot' does not exist"
    )


def test_image_form_cluster_errors_name_form_fields(world_pools: ClusterInfo) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_image_form(
            {"image": "img:1", "nodePool": "mi300x", "queue": "secret"},
            cluster=world_pools,
            workspace_queues={"community"},
        )
    assert [e.field for e in caught.value.errors] == ["queue", "nodePool"]


def test_pool_defaults() -> None:
    pool = PoolInfo("p", "nvidia", "T4-16GB", 16384, 4)
    assert pool.sharing_modes == frozenset({"exclusive", "fraction"})
    assert pool.mig_profiles == frozenset()
