"""The spec's `kind`: training by default, notebook and inference with their own fields and errors
(line, column and field), the trip back to YAML, and what each kind asks the scheduler for."""

from __future__ import annotations

import pytest

from scheduling.spec import (
    SpecError,
    parse_job_spec,
    parse_job_spec_obj,
    spec_to_dict,
    spec_to_yaml,
    validate_spec,
)
from scheduling.spec.kinds import service_bounds
from scheduling.spec.requests import role_requests
from scheduling.spec.workloads import DEFAULT_NOTEBOOK_IMAGE

MINIMAL_YAML = "name: job\nroles:\n  - name: main\n    image: busybox:1.36\n"

NOTEBOOK = """\
kind: notebook
name: scratch
queue: vision-lab
"""

NOTEBOOK_FULL = """\
kind: notebook
name: alice-lab
queue: vision-lab
priority: 10
preemptible: true
image: quay.io/jupyter/scipy-notebook:2024-07-29
env: {PROJECT: vision}
sharing: mig
resources: {mig: 3g.40gb, cpu: 8, memory: 32Gi}
nodePool: h100-mig
home: {size: 50Gi}
idleAfter: 45m
"""

SERVICE = """\
kind: inference
name: llama-chat
queue: vision-lab
server: vllm
model: {path: /models/llama-3-8b, name: llama-3-8b}
resources: {gpu: 0.25, gpuMemory: 20Gi, gpuMemoryLimit: 30Gi, cpu: 4, memory: 32Gi}
replicas: {min: 0, max: 4}
target: {concurrency: 6}
scaleDownDelay: 2m
"""

CUSTOM = """\
kind: inference
name: ranker
server: custom
image: registry.io/team/ranker:1.2
command: ["python", "serve.py"]
port: 9000
healthPath: /ready
sharing: exclusive
resources: {gpu: 1}
replicas: 2
target: {rps: 12.5}
"""


def errors(text: str) -> list[tuple[int | None, int | None, str | None, str]]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    return [(e.line, e.column, e.field, e.message) for e in caught.value.errors]


def test_training_is_the_default_and_can_be_named():
    plain = parse_job_spec(MINIMAL_YAML)
    named = parse_job_spec("kind: training\n" + MINIMAL_YAML)
    assert plain.kind == named.kind == "training"
    assert plain == named
    assert "kind" not in spec_to_dict(plain)       # stored specs of training jobs are as they were


def test_a_notebook_defaults_to_half_a_gpu_jupyterlab_and_the_pools_idle_window():
    spec = parse_job_spec(NOTEBOOK)
    role = spec.roles[0]
    assert (spec.kind, spec.type, spec.preemptible) == ("notebook", "single", False)
    assert (role.name, role.image, role.min_replicas, role.max_replicas) == ("notebook", DEFAULT_NOTEBOOK_IMAGE, 1, 1)
    assert (role.sharing, role.gpu_milli, role.num_gpus) == ("fraction", 500, 1)
    assert spec.notebook.home_mib == 10 * 1024 and spec.notebook.idle_after_s is None
    assert spec.inference is None


def test_a_notebook_with_every_field(world_pools):
    spec = parse_job_spec(NOTEBOOK_FULL, cluster=world_pools)
    role = spec.roles[0]
    assert (spec.priority, spec.preemptible) == (10, True)
    assert (role.sharing, role.mig_profile, role.cpu_milli, role.mem_mib) == ("mig", "3g.40gb", 8000, 32 * 1024)
    assert role.env == (("PROJECT", "vision"),) and role.node_pool == "h100-mig"
    assert spec.notebook.home_mib == 50 * 1024 and spec.notebook.idle_after_s == 45 * 60
    whole = parse_job_spec(NOTEBOOK + "resources: {gpu: 1}\n")
    assert (whole.roles[0].sharing, whole.roles[0].num_gpus) == ("exclusive", 1)   # gpu: 1 means a whole GPU
    quarter = parse_job_spec(NOTEBOOK + "sharing: fraction\nresources: {gpu: 0.25, gpuMemory: 10Gi}\n")
    assert (quarter.roles[0].gpu_milli, quarter.roles[0].gpu_mem_mib) == (250, 10 * 1024)


def test_an_inference_service(world_pools):
    spec = parse_job_spec(SERVICE, cluster=world_pools)
    role, serving = spec.roles[0], spec.inference
    assert (spec.kind, spec.preemptible, role.name) == ("inference", False, "server")
    assert (role.image, serving.port, serving.health_path) == ("vllm/vllm-openai:v0.5.4", 8000, "/health")
    assert (serving.model_path, serving.model_registry, serving.model_name) == ("/models/llama-3-8b", None,
                                                                                "llama-3-8b")
    assert (role.sharing, role.gpu_milli, role.gpu_mem_mib, serving.gpu_mem_limit_mib) == (
        "fraction", 250, 20 * 1024, 30 * 1024)
    assert (role.min_replicas, role.max_replicas) == (0, 4)
    assert (serving.target_metric, serving.target_value, serving.scale_down_delay_s) == ("concurrency", 6, 120)


def test_a_custom_server_and_triton_defaults():
    spec = parse_job_spec(CUSTOM)
    serving = spec.inference
    assert (serving.server, serving.port, serving.health_path, serving.model_path) == ("custom", 9000, "/ready", None)
    assert spec.roles[0].command == ("python", "serve.py")
    assert (spec.roles[0].min_replicas, spec.roles[0].max_replicas) == (2, 2)
    assert (serving.target_metric, serving.target_value) == ("rps", 12.5)
    assert serving.scale_down_delay_s == 300                  # default 5 minutes
    triton = parse_job_spec("kind: inference\nname: t\nserver: Triton\nmodel: {registry: hf.co/org/m}\n")
    assert (triton.inference.server, triton.inference.health_path) == ("triton", "/v2/health/ready")
    assert triton.inference.model_registry == "hf.co/org/m"
    assert (triton.inference.target_metric, triton.inference.target_value) == ("concurrency", 4)


@pytest.mark.parametrize(("target", "metric", "value"), [("{queueDepth: 2}", "queueDepth", 2.0),
                                                          ("{ttftP95: 0.5}", "ttftP95", 0.5)])
def test_targets_on_what_servers_report(target, metric, value):
    spec = parse_job_spec(f"kind: inference\nname: t\nmodel: {{path: /m}}\ntarget: {target}\n")
    assert (spec.inference.target_metric, spec.inference.target_value) == (metric, value)
    again = parse_job_spec_obj(spec_to_dict(spec))
    assert (again.inference.target_metric, again.inference.target_value) == (metric, value)


@pytest.mark.parametrize("text", [NOTEBOOK, NOTEBOOK_FULL, SERVICE, CUSTOM])
def test_every_kind_survives_the_trip_to_yaml_and_json(text):
    spec = parse_job_spec(text)
    assert parse_job_spec(spec_to_yaml(spec)) == spec
    assert parse_job_spec_obj(spec_to_dict(spec)) == spec
    assert spec_to_dict(spec)["kind"] == spec.kind


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("kind: notebok\nname: x\n", [
        (1, 7, "kind", "kind 'notebok' is not one of training | notebook | inference; did you mean 'notebook'?")],
        id="kind_misspelt"),
    pytest.param(NOTEBOOK + "replicas: 2\n", [
        (4, 1, "replicas", "replicas does not apply to kind notebook: a notebook has exactly one replica")],
        id="notebook_replicas"),
    pytest.param(NOTEBOOK + "roles: []\n", [
        (4, 1, "roles", "roles does not apply to kind notebook: a notebook's image and resources are top-level "
                        "fields, not roles")], id="notebook_roles"),
    pytest.param(NOTEBOOK + "home: {size: 5Ti}\nidleAfter: 10s\n", [
        (4, 14, "home.size", "home.size (5Ti) must be from 1Gi to 1Ti"),
        (5, 12, "idleAfter", "idleAfter (10s) must be from 1m to 1d")], id="notebook_bounds"),
    pytest.param(NOTEBOOK + "home: 20Gi\n", [
        (4, 7, "home", "home must be a mapping of the home volume's size, e.g. {size: 20Gi}, not '20Gi'")],
        id="notebook_home_not_mapping"),
    pytest.param(NOTEBOOK + "imgae: x:1\n", [
        (4, 1, "imgae", "unknown field 'imgae' in a notebook; did you mean 'image'?")], id="notebook_unknown"),
    pytest.param(NOTEBOOK + "resources: {gpu: 0.5, gpuMemoryLimit: 20Gi}\n", [
        (4, 23, "resources.gpuMemoryLimit",
         "unknown field 'gpuMemoryLimit' in resources; did you mean 'gpuMemory'?")], id="notebook_no_burst"),
    pytest.param("kind: inference\nname: s\n", [
        (1, 1, "model", "model is required with server vllm: {path: /models/...} on a volume or {registry: ...}")],
        id="service_model_required"),
    pytest.param("kind: inference\nname: s\nserver: custom\n", [
        (1, 1, "image", "image is required: a custom server names its image, port and healthPath"),
        (1, 1, "port", "port is required: a custom server names its image, port and healthPath"),
        (1, 1, "healthPath", "healthPath is required: a custom server names its image, port and healthPath")],
        id="custom_needs_image_port_health"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m/../etc, registry: hf.co/x}\n", [
        (3, 15, "model.path", "model.path must not contain '..'"),
        (3, 36, "model.registry", "model needs exactly one of path and registry, not both")],
        id="model_path_and_registry"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\nresources: {gpu: 0.5}\n", [
        (4, 12, "resources.gpuMemory", "resources.gpuMemory is required for an inference server on a fraction: "
                                       "the memory its model needs (see the GPU advice)")],
        id="fraction_needs_memory"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\n"
                 "resources: {gpu: 0.5, gpuMemory: 20Gi, gpuMemoryLimit: 10Gi}\n", [
        (4, 56, "resources.gpuMemoryLimit", "resources.gpuMemoryLimit (10Gi) is less than resources.gpuMemory (20Gi)")],
        id="burst_below_request"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\nresources: {gpu: 1, gpuMemoryLimit: 90Gi}\n", [
        (4, 37, "resources.gpuMemoryLimit", "resources.gpuMemoryLimit applies only to sharing fraction")],
        id="burst_needs_fraction"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\ntarget: {rps: 0}\nscaleDownDelay: 2d\n", [
        (4, 15, "target.rps", "target.rps must be a number above 0 and at most 100000, not 0"),
        (5, 17, "scaleDownDelay", "scaleDownDelay (2d) must be from 1s to 1d")], id="target_and_delay"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\ntarget: {concurrency: 4, rps: 2}\n", [
        (4, 31, "target.rps", "target needs exactly one of concurrency, rps, queueDepth, ttftP95")],
        id="two_targets"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\ntarget: {ttftP95: 900}\n", [
        (4, 19, "target.ttftP95", "target.ttftP95 must be a number above 0 and at most 600, not 900")],
        id="ttft_target_too_high"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\nreplicas: {min: 3, max: 2}\nport: 70000\n", [
        (4, 25, "replicas.max", "replicas.max (2) is less than replicas.min (3)"),
        (5, 7, "port", "port (70000) must be from 1 to 65535")], id="replicas_and_port"),
    pytest.param("kind: inference\nname: s\nmodel: {path: /m}\ntype: pytorch\nreduceCost: true\n", [
        (4, 1, "type", "type does not apply to kind inference: an inference service runs one role; type applies to training"),
        (5, 1, "reduceCost", "reduceCost does not apply to kind inference: an inference service is not reduced-cost work; "
                             "preemptible: true lets other work reclaim it")], id="training_fields"),
])
def test_errors_name_line_column_and_field(text, expected):
    assert errors(text) == expected


def test_kind_with_seed_fields_is_refused_as_mixed():
    [(line, _, field, message)] = errors("kind: notebook\nTaskName: x\n")
    assert (line, field) == (1, "kind") and "mixes task-form fields (TaskName)" in message


def test_cluster_problems_point_at_the_top_level_fields(world_pools):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(NOTEBOOK + "sharing: mig\nresources: {mig: 7g.80gb}\n", cluster=world_pools)
    [issue] = caught.value.errors
    assert (issue.line, issue.field) == (5, "resources.mig") and "7g.80gb" in issue.message
    spec = parse_job_spec(NOTEBOOK + "gpuModel: B200\n")
    [issue] = validate_spec(spec, cluster=world_pools)
    assert issue.field == "gpuModel" and issue.line is None


def test_what_a_notebook_asks_the_scheduler_for():
    [request] = role_requests(parse_job_spec(NOTEBOOK), None)
    assert (request["kind"], request["min_replicas"], request["max_replicas"]) == ("notebook", 1, 1)
    assert (request["mode"], request["gpu_milli"]) == ("fraction", 500)


def test_a_service_asks_for_its_minimum_and_keeps_its_range():
    [request] = role_requests(parse_job_spec(SERVICE), None)
    assert (request["kind"], request["scale_min"], request["scale_max"]) == ("inference", 0, 4)
    assert (request["min_replicas"], request["max_replicas"]) == (1, 1)   # the core has no job of 0 replicas
    assert request["gpu_mem_limit_mib"] == 30 * 1024 and request["gpu_mem_mib"] == 20 * 1024
    [custom] = role_requests(parse_job_spec(CUSTOM), None)
    assert (custom["min_replicas"], custom["max_replicas"], custom["gpu_mem_limit_mib"]) == (2, 2, 0)
    [training] = role_requests(parse_job_spec(MINIMAL_YAML), None)
    assert "kind" not in training and "scale_min" not in training


@pytest.mark.parametrize(("scale", "bounds"), [
    ((0, 4, 0), None), ((0, 4, 3), (1, 3)), ((2, 4, 0), (2, 2)), ((2, 4, 9), (2, 4)), ((1, 1, 1), (1, 1)),
])
def test_service_bounds(scale, bounds):
    """(declared min, declared max, desired) -> the core's (min, max), None at zero."""
    assert service_bounds(*scale) == bounds
