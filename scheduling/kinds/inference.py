"""Inference services: a model server whose replicas the autoscaler sets between min and max, stopped
and woken again, listed on the services page and reached through the portal's endpoint (/serve/)."""

from __future__ import annotations

import shlex
from typing import Any

from django.utils.translation import gettext_lazy, gettext_noop

from scheduling import inference, service_scale
from scheduling.backends.base import MODEL_SERVER
from scheduling.kinds.base import RATES_PER_REPLICAS
from scheduling.kinds.one_role import OneRoleKind
from scheduling.spec.kind_forms import JOB_FIELDS, SLICE_FIELDS, form_number, slug
from scheduling.spec.kinds import read_inference, service_requests, service_to_dict
from scheduling.spec.units import format_duration, format_memory
from scheduling.spec.workloads import SERVER_DEFAULTS


class InferenceKind(OneRoleKind):
    name = "inference"
    label = gettext_lazy("Inference service")
    noun = gettext_noop("an inference service")
    resource_type = "Inference service"
    interactive = True
    stoppable = True
    name_taken = gettext_noop("service '%(name)s' already exists in workspace '%(workspace)s' (%(state)s): "
                              "start or delete it, or choose another name")
    launch_shape = MODEL_SERVER
    ssh = False
    autoscaled = True
    quote_rates = RATES_PER_REPLICAS
    # Form field -> where it goes in the document. `targetMetric` and `targetValue` together make
    # `target: {metric: value}`.
    form_fields = {
        **JOB_FIELDS, "server": ("server",), "image": ("image",), "command": ("command",), "port": ("port",),
        "healthPath": ("healthPath",), "modelPath": ("model", "path"), "modelRegistry": ("model", "registry"),
        "modelName": ("model", "name"), **SLICE_FIELDS, "gpuMemoryLimit": ("resources", "gpuMemoryLimit"),
        "minReplicas": ("replicas", "min"), "maxReplicas": ("replicas", "max"), "targetMetric": ("target",),
        "targetValue": ("target",), "scaleDownDelay": ("scaleDownDelay",),
    }
    form_extra_names = {("model",): "modelPath", ("replicas",): "minReplicas", ("resources",): "gpus",
                        ("target", "concurrency"): "targetValue", ("target", "rps"): "targetValue",
                        ("target", "queueDepth"): "targetValue", ("target", "ttftP95"): "targetValue"}
    form_template = "scheduling/kinds/inference_form.html"
    tab_label = gettext_lazy("Inference")
    listed_on = "services"

    def read(self, r):
        return read_inference(r, self.name)

    def document_from_role(self, spec, role: dict[str, Any]) -> dict[str, Any]:
        return service_to_dict(spec, role)

    def requests(self, spec, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return service_requests(spec, requests)

    def form_default_name(self, values: dict[str, Any]) -> str:
        for key in ("modelName", "modelPath", "modelRegistry", "image"):
            if isinstance(values.get(key), str) and (name := slug(values[key])):
                return name
        return "service"

    def form_values(self, spec) -> dict[str, str]:
        role, serving = spec.roles[0], spec.inference
        image, port, health = SERVER_DEFAULTS.get(serving.server, (None, None, None))
        # a server's own image, port and path show blank, so that choosing another server takes its own
        return {
            "server": serving.server,
            "image": "" if role.image == image else role.image,
            "command": shlex.join(role.command),
            "port": "" if serving.port == port else str(serving.port),
            "healthPath": "" if serving.health_path == health else serving.health_path,
            "modelPath": serving.model_path or "",
            "modelRegistry": serving.model_registry or "",
            "modelName": serving.model_name or "",
            "gpuMemoryLimit": format_memory(serving.gpu_mem_limit_mib) if serving.gpu_mem_limit_mib else "",
            "minReplicas": str(role.min_replicas),
            "maxReplicas": str(role.max_replicas),
            "targetMetric": serving.target_metric,
            "targetValue": form_number(serving.target_value),
            "scaleDownDelay": format_duration(serving.scale_down_delay_s),
        }

    def launch_fields(self, job) -> dict[str, Any]:
        spec = inference.inference_spec(job)
        if spec is None:
            return super().launch_fields(job)
        return {**super().launch_fields(job), "token": inference.api_key(job.pk),
                "base_url": self.base_url(job.workspace.slug, job.name),
                "server": spec.server, "port": spec.port, "health_path": spec.health_path,
                "model_path": spec.model_path or "", "model_registry": spec.model_registry or "",
                "model_name": spec.model_name or job.name, "gpu_mem_limit_mib": spec.gpu_mem_limit_mib or 0}

    def base_url(self, workspace: str, name: str) -> str:
        return inference.base_url(workspace, name)

    def scale_target(self, spec) -> tuple[str, float]:
        return spec.inference.target_metric, float(spec.inference.target_value)

    def after_submit(self, job) -> None:
        service_scale.create_scale(job)  # the range the autoscaler keeps it in

    def before_start(self, job) -> None:
        service_scale.restarted(job)  # it asks for its minimum again

    def metrics_auth(self, found, job_id: int) -> str:
        return f"Bearer {found.token or inference.api_key(job_id)}"


KIND = InferenceKind()
