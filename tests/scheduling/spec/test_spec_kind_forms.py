"""The image form's notebook and inference tabs: the clean YAML of each kind, errors named by form field,
and the tab's fields read back from a spec (so the tab follows the YAML)."""

from __future__ import annotations

import pytest
import yaml

from scheduling.spec import (
    SpecError,
    image_form_values,
    parse_job_spec,
    spec_from_image_form,
    spec_to_yaml,
)
from scheduling.spec.workloads import DEFAULT_NOTEBOOK_IMAGE


def fields_of(error: SpecError) -> dict[str, str]:
    return {e.field: e.message for e in error.errors}


def test_a_notebook_from_its_tab():
    spec = spec_from_image_form({"kind": "notebook", "gpus": "0.5", "homeSize": "20Gi", "idleAfter": "30m",
                                 "queue": "vision-lab", "name": ""})
    assert (spec.kind, spec.name, spec.queue) == ("notebook", "pytorch-notebook", "vision-lab")
    role = spec.roles[0]
    assert (role.image, role.sharing, role.gpu_milli) == (DEFAULT_NOTEBOOK_IMAGE, "fraction", 500)
    assert (spec.notebook.home_mib, spec.notebook.idle_after_s) == (20 * 1024, 30 * 60)
    doc = yaml.safe_load(spec_to_yaml(spec))
    assert doc["kind"] == "notebook" and doc["home"] == {"size": "20Gi"} and doc["idleAfter"] == "30m"
    assert "roles" not in doc and "replicas" not in doc  # the clean form of a notebook
    assert parse_job_spec(spec_to_yaml(spec)) == spec


def test_a_notebook_tab_left_as_it_is_is_half_a_gpu_of_jupyterlab():
    spec = spec_from_image_form({"kind": "notebook"})
    assert (spec.roles[0].image, spec.roles[0].gpu_milli, spec.notebook.idle_after_s) == (
        DEFAULT_NOTEBOOK_IMAGE, 500, None)


def test_a_service_from_its_tab():
    form = {"kind": "inference", "server": "vllm", "modelPath": "/models/llama-3-8b", "modelName": "llama",
            "sharing": "fraction", "gpus": "0.5", "gpuMemory": "20Gi", "gpuMemoryLimit": "30Gi",
            "minReplicas": "0", "maxReplicas": "3", "targetMetric": "rps", "targetValue": "2.5",
            "scaleDownDelay": "10m", "port": "", "healthPath": ""}
    spec = spec_from_image_form(form)
    serving = spec.inference
    assert (spec.kind, spec.name) == ("inference", "llama")  # named after the served model
    assert (serving.server, serving.port, serving.health_path) == ("vllm", 8000, "/health")
    assert (serving.model_path, serving.model_name, serving.gpu_mem_limit_mib) == ("/models/llama-3-8b", "llama",
                                                                                   30 * 1024)
    assert (serving.target_metric, serving.target_value, serving.scale_down_delay_s) == ("rps", 2.5, 600)
    role = spec.roles[0]
    assert (role.min_replicas, role.max_replicas, role.gpu_milli, role.gpu_mem_mib) == (0, 3, 500, 20 * 1024)
    doc = yaml.safe_load(spec_to_yaml(spec))
    assert doc["replicas"] == {"min": 0, "max": 3} and doc["target"] == {"rps": 2.5}
    assert doc["resources"]["gpuMemoryLimit"] == "30Gi" and doc["model"] == {"path": "/models/llama-3-8b",
                                                                              "name": "llama"}


def test_a_custom_server_names_its_image_port_and_health_path():
    spec = spec_from_image_form({"kind": "inference", "server": "custom", "image": "registry.io/me/srv:1",
                                 "port": "9000", "healthPath": "/ok", "command": "serve --fast",
                                 "modelRegistry": "hf.co/org/Model-7B"})
    assert (spec.inference.port, spec.inference.health_path, spec.roles[0].command) == (9000, "/ok",
                                                                                       ("serve", "--fast"))
    assert spec.name == "model-7b" and spec.inference.model_registry == "hf.co/org/Model-7B"
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"kind": "inference", "server": "custom"})
    assert set(fields_of(caught.value)) == {"image", "port", "healthPath"}


@pytest.mark.parametrize(("form", "field", "message"), [
    ({"kind": "inference"}, "modelPath", "model is required with server vllm"),
    ({"kind": "inference", "modelPath": "/m", "modelRegistry": "hf.co/a/b"}, "modelRegistry", "exactly one of"),
    ({"kind": "inference", "modelPath": "/m", "sharing": "fraction", "gpus": "0.5"}, "gpuMemory",
     "gpuMemory is required for an inference server on a fraction"),
    ({"kind": "inference", "modelPath": "/m", "sharing": "fraction", "gpus": "0.5", "gpuMemory": "20Gi",
      "gpuMemoryLimit": "10Gi"}, "gpuMemoryLimit", "is less than"),
    ({"kind": "inference", "modelPath": "/m", "gpuMemoryLimit": "30Gi"}, "gpuMemoryLimit", "only to sharing fraction"),
    ({"kind": "inference", "modelPath": "/m", "minReplicas": "3", "maxReplicas": "1"}, "maxReplicas",
     "maxReplicas (1) is less than minReplicas (3)"),
    ({"kind": "inference", "modelPath": "/m", "targetValue": "2.5"}, "targetValue", "whole number"),
    ({"kind": "inference", "modelPath": "/m", "targetMetric": "qps"}, "targetMetric", "not one of concurrency, rps"),
    ({"kind": "inference", "modelPath": "/m", "port": "http"}, "port", "'http' is not a whole number"),
    ({"kind": "inference", "modelPath": "/m", "scaleDownDelay": "2d"}, "scaleDownDelay", "must be from"),
    ({"kind": "inference", "modelPath": "/m", "reduceCost": "true"}, "reduceCost", "unknown field"),
    ({"kind": "notebook", "homeSize": "1Mi"}, "homeSize", "home.size (1Mi) must be from 1Gi to 1Ti"),
    ({"kind": "notebook", "idleAfter": "10s"}, "idleAfter", "must be from 1m to 1d"),
    ({"kind": "notebook", "gpus": "lots"}, "gpus", "'lots' is not a number of GPUs"),
    ({"kind": "notebook", "minReplicas": "2"}, "minReplicas", "unknown field 'minReplicas' for kind notebook"),
    ({"kind": "serving"}, "kind", "is not one of training, notebook, inference"),
])
def test_errors_name_the_tabs_field(form, field, message):
    with pytest.raises(SpecError) as caught:
        spec_from_image_form(form)
    found = fields_of(caught.value)
    assert field in found and message in found[field], found
    assert all(e.line is None for e in caught.value.errors)  # a form has no lines: the field says where


def test_the_cluster_check_names_the_field():
    from scheduling.spec import ClusterInfo, PoolInfo

    cluster = ClusterInfo(pools=(PoolInfo(name="h100", vendor="nvidia", gpu_model="H100-80GB", gpu_memory_mib=81920,
                                          gpus_per_node=8, sharing_modes=frozenset({"exclusive", "fraction"})),))
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"kind": "inference", "modelPath": "/m", "nodePool": "nowhere"}, cluster=cluster,
                             workspace_queues=["vision-lab"])
    assert "nodePool" in fields_of(caught.value)
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"kind": "notebook", "queue": "elsewhere"}, cluster=cluster,
                             workspace_queues=["vision-lab"])
    assert "queue" in fields_of(caught.value)


@pytest.mark.parametrize("form", [
    {"kind": "notebook", "image": "jupyter/base:1", "gpus": "0.25", "gpuMemory": "8Gi", "homeSize": "5Gi",
     "idleAfter": "1h", "priority": "3", "queue": "vision-lab"},
    {"kind": "notebook", "sharing": "mig", "gpus": "", "mig": "1g.10gb"},
    {"kind": "inference", "modelPath": "/models/m", "minReplicas": "0", "maxReplicas": "5", "targetValue": "8"},
    {"kind": "inference", "server": "triton", "modelRegistry": "nvcr.io/team/model:1", "gpus": "2"},
    {"kind": "inference", "server": "custom", "image": "r.io/s:1", "port": "9000", "healthPath": "/ok",
     "sharing": "fraction", "gpus": "0.3", "gpuMemory": "12Gi", "gpuMemoryLimit": "16Gi"},
])
def test_a_tab_read_back_from_its_yaml_gives_the_same_fields(form):
    spec = spec_from_image_form(form)
    values, hidden = image_form_values(parse_job_spec(spec_to_yaml(spec)))
    assert values["kind"] == form["kind"] and hidden == []
    assert spec_from_image_form(values) == spec
    assert image_form_values(spec_from_image_form(values))[0] == values


def test_a_servers_own_image_port_and_path_show_blank_so_another_server_takes_its_own():
    values, _ = image_form_values(spec_from_image_form({"kind": "inference", "modelPath": "/m"}))
    assert (values["server"], values["image"], values["port"], values["healthPath"]) == ("vllm", "", "", "")
    triton = spec_from_image_form({**values, "server": "triton"})
    assert (triton.roles[0].image, triton.inference.health_path) == ("nvcr.io/nvidia/tritonserver:24.07-py3",
                                                                     "/v2/health/ready")


def test_what_a_tab_cannot_show_is_said():
    spec = parse_job_spec("kind: notebook\nname: lab\npreemptible: true\nenv: {A: '1'}\nvendor: any\n")
    values, hidden = image_form_values(spec)
    assert values["kind"] == "notebook" and hidden == ["env", "preemptible: true", "vendor: any"]


def test_the_training_tab_is_as_before():
    spec = spec_from_image_form({"image": "busybox", "gpus": "2"})
    assert spec == spec_from_image_form({"kind": "training", "image": "busybox", "gpus": "2"})
    values, hidden = image_form_values(spec)
    assert values["kind"] == "training" and hidden == []
    assert spec_from_image_form(values) == spec
