"""The clean form's `kind`: training (the roles reader), notebook and inference.

A notebook or an inference service is one role written at the top level of the document (image,
sharing, resources, vendor, gpuModel, nodePool, as in a role) plus the fields of its kind. They
are read with the role readers of `read.py`, so every error names its line, column and field the
same way (in the active language), and they become a `single` JobSpec with one role, `kind` and the kind's own part
(`workloads.NotebookSpec`, `workloads.InferenceSpec`).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from scheduling import kinds
from scheduling.core.units import gpu_model_name
from scheduling.spec.buckets import read_buckets
from scheduling.spec.chain import read_after, read_array
from scheduling.spec.checkpoint import read_checkpoint, read_grace
from scheduling.spec.cluster import ClusterProblem
from scheduling.spec.deadline import read_deadline
from scheduling.spec.lifecycle import RUNTIME_KEYS, life_to_dict, read_max_runtime
from scheduling.spec.load import Path
from scheduling.spec.model import DEFAULT_DURATION_S, DEFAULT_GRACE_S, VENDORS, JobSpec, RoleSpec
from scheduling.spec.read import (
    CLEAN_ROLE_SOURCES,
    DNS_HINT,
    DNS_LABEL,
    GPU_MODEL_HINT,
    IMAGE_RE,
    MISSING,
    MODEL_RE,
    Reader,
    ReadResult,
    clean_locate,
    is_number,
    read_clean,
    read_command,
    read_env,
    read_replicas,
    read_resources,
    read_secret_env,
    read_secret_mounts,
    show,
)
from scheduling.spec.tensorboard import read_tensorboard
from scheduling.spec.units import format_duration, format_memory, parse_duration, parse_memory
from scheduling.spec.volumes import read_volumes
from scheduling.spec.workloads import (
    DEFAULT_HOME_MIB,
    DEFAULT_NOTEBOOK_GPU,
    DEFAULT_NOTEBOOK_IMAGE,
    DEFAULT_SCALE_DOWN_DELAY_S,
    LIMIT_KEYS,
    MAX_HOME_MIB,
    MAX_IDLE_AFTER_S,
    MAX_REQUESTS_PER_MINUTE,
    MAX_SCALE_DOWN_DELAY_S,
    MAX_TARGET_CONCURRENCY,
    MAX_TARGET_RPS,
    MAX_TARGET_TTFT_S,
    MAX_TOKENS_PER_MINUTE,
    MIN_IDLE_AFTER_S,
    NOTEBOOK_ROLE,
    SERVER_DEFAULTS,
    SERVER_ROLE,
    SERVERS,
    TARGET_METRICS,
    InferenceSpec,
    NotebookSpec,
)

JOB_KEYS = ("kind", "name", "queue", "priority", "preemptible", "expectedDuration", *RUNTIME_KEYS,
            "terminationGracePeriod")
SLICE_KEYS = ("sharing", "resources", "vendor", "gpuModel", "nodePool")
NOTEBOOK_KEYS = (*JOB_KEYS, "image", "env", "secretMounts", *SLICE_KEYS, "home", "idleAfter", "volumes",
                 "buckets")
INFERENCE_KEYS = (*JOB_KEYS, "server", "image", "command", "env", "secretMounts", "port", "healthPath", "model",
                  *SLICE_KEYS, "replicas", "target", "scaleDownDelay", "limits", "volumes", "buckets")
HOME_KEYS = ("size",)
MODEL_KEYS = ("path", "registry", "name")
BURST_KEY = "gpuMemoryLimit"   # resources: a fraction's burstable memory limit (inference)
MIN_HOME_MIB = 1024

# Fields of the training form that a notebook or a service does not take, and why (msgids).
NOT_FOR_KIND = {
    "type": gettext_noop("%(noun)s runs one role; type applies to training"),
    "roles": gettext_noop("%(noun)s's image and resources are top-level fields, not roles"),
    "reduceCost": gettext_noop("%(noun)s is not reduced-cost work; preemptible: true lets other work reclaim it"),
    "checkpointPath": gettext_noop("checkpointPath applies to training"),
    "checkpoint": gettext_noop("checkpoint applies to training"),
    "tensorboard": gettext_noop("tensorboard runs beside a training job's first replica"),
    "replicas": gettext_noop("a notebook has exactly one replica"),
    "command": gettext_noop("a notebook runs its image's own command"),
}
MODEL_PATH_RE = re.compile(r"^/[A-Za-z0-9._\-/]{0,1023}$")
SERVED_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:]{0,127}$")
HEALTH_PATH_RE = re.compile(r"^/[A-Za-z0-9._~\-/]{0,255}$")


def read_any_clean(r: Reader) -> ReadResult:
    """The clean form of any kind: `kind` (default training) picks the kind, whose reader reads it."""
    doc: dict[str, Any] = r.doc.value
    name = r.choice(doc, (), "kind", kinds.names(), default=kinds.DEFAULT)
    if name is None:
        return ReadResult(None, clean_locate)
    return kinds.get(name).read(r)


def read_roles(r: Reader, kind: str) -> ReadResult:
    """A kind written with roles, as training is (the clean form's roles reader), as a spec of `kind`."""
    raw_roles = r.doc.value.get("roles")
    mounts = [read_volumes(r, raw, ("roles", i)) if isinstance(raw, dict) else ()
              for i, raw in enumerate(raw_roles)] if isinstance(raw_roles, list) else []
    buckets = [read_buckets(r, raw, ("roles", i)) if isinstance(raw, dict) else ()
               for i, raw in enumerate(raw_roles)] if isinstance(raw_roles, list) else []
    after, array = read_after(r), read_array(r)
    checkpoint, grace = read_checkpoint(r, r.doc.value), read_grace(r, r.doc.value)
    deadline = read_deadline(r, r.doc.value)
    tensorboard = read_tensorboard(r, r.doc.value)
    result = read_clean(r)  # no spec when a role's volumes or buckets had a problem: it was recorded first
    if (result.spec is None or checkpoint is MISSING or grace is None or deadline is MISSING
            or tensorboard is MISSING):
        return ReadResult(None, result.locate)
    roles = tuple(replace(role, volumes=mounts[i] or (), buckets=buckets[i] or ())
                  for i, role in enumerate(result.spec.roles))
    return ReadResult(replace(result.spec, kind=kind, roles=roles, after=after or (), array=array or None,
                              checkpoint=checkpoint, termination_grace_s=grace, deadline=deadline,
                              tensorboard=tensorboard),
                      result.locate)


def top_locate(problem: ClusterProblem) -> tuple[Path, ...]:
    """Where a cluster problem points in a notebook or service: its role's fields are top-level."""
    if problem.role is None:
        return ((problem.attr,),)
    return CLEAN_ROLE_SOURCES.get(problem.attr, ((),))


# -- shared parts --------------------------------------------------------------------------------


def _check_kind_keys(r: Reader, doc: dict[str, Any], kind: str, allowed: tuple[str, ...]) -> None:
    misplaced = [k for k in doc if k not in allowed and k in NOT_FOR_KIND]
    noun = _(kinds.get(kind).noun)
    for key in misplaced:
        why = _(NOT_FOR_KIND[key]) % {"noun": noun}
        r.error((key,), _("%(key)s does not apply to kind %(kind)s: %(why)s") % {"key": key, "kind": kind, "why": why},
                key=True)
    r.check_keys({k: v for k, v in doc.items() if k not in misplaced}, (), allowed, where=noun)


def _job_fields(r: Reader, doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": r.text(doc, (), "name", required=True, pattern=DNS_LABEL, hint=DNS_HINT),
        "queue": r.text(doc, (), "queue", pattern=DNS_LABEL, hint=DNS_HINT),
        "priority": r.integer(doc, (), "priority", lo=0, hi=100, default=0),
        # interactive and serving work is not preemptible unless the tenant says so
        "preemptible": r.boolean(doc, (), "preemptible", default=False),
        "expected_duration_s": r.quantity(doc, (), "expectedDuration", parse_duration, DEFAULT_DURATION_S),
        "max_runtime_s": read_max_runtime(r, doc),
        "termination_grace_s": read_grace(r, doc),
    }


def _placement(r: Reader, doc: dict[str, Any]) -> dict[str, Any]:
    vendor = r.choice(doc, (), "vendor", VENDORS, default="nvidia", fold_case=True)
    gpu_model = r.text(doc, (), "gpuModel", pattern=MODEL_RE, hint=GPU_MODEL_HINT)
    node_pool = r.text(doc, (), "nodePool", pattern=DNS_LABEL, hint=DNS_HINT)
    return {"vendor": vendor, "gpu_model": gpu_model_name(gpu_model) if gpu_model else gpu_model,
            "node_pool": node_pool}


def _image(r: Reader, doc: dict[str, Any], default: str | None) -> Any:
    return r.text(doc, (), "image", pattern=IMAGE_RE, default=default,
                  hint=gettext_noop("an image reference such as registry.io/team/server:1.0"))


def _bounded_duration(r: Reader, doc: dict[str, Any], key: str, lo: int, hi: int, default: Any) -> Any:
    seconds = r.quantity(doc, (), key, parse_duration, default)
    if doc.get(key) is not None and isinstance(seconds, int) and not lo <= seconds <= hi:
        r.error((key,), _("%(name)s (%(value)s) must be from %(lo)s to %(hi)s") % {
            "name": key, "value": format_duration(seconds), "lo": format_duration(lo), "hi": format_duration(hi)})
        return None
    return seconds


def _complete(*values: Any) -> bool:
    """Every value a reader must give (a reader that gives None has said why)."""
    return not any(v is None or v is MISSING for v in values)


# -- notebook --------------------------------------------------------------------------------------


def read_notebook(r: Reader, kind: str) -> ReadResult:
    """A notebook's document, as a spec of `kind`."""
    doc: dict[str, Any] = r.doc.value
    _check_kind_keys(r, doc, kind, NOTEBOOK_KEYS)
    job = _job_fields(r, doc)
    image = _image(r, doc, DEFAULT_NOTEBOOK_IMAGE)
    env = read_env(r, doc, ())
    secrets = {"secret_env": read_secret_env(r, doc, ()), "secret_mounts": read_secret_mounts(r, doc, ())}
    place = _placement(r, doc)
    view = doc
    raw = doc.get("resources")
    if doc.get("sharing") in (None, "fraction") and (raw is None or (isinstance(raw, dict) and raw.get("gpu") is None
                                                                     and raw.get("mig") is None)):
        # fractions are a notebook's default: half a GPU unless the spec says otherwise
        view = {**doc, "resources": {**(raw or {}), "gpu": float(DEFAULT_NOTEBOOK_GPU)}}
    resources = read_resources(r, view, (), place["vendor"])
    home = _read_home(r, doc)
    idle_after = _bounded_duration(r, doc, "idleAfter", MIN_IDLE_AFTER_S, MAX_IDLE_AFTER_S, MISSING)
    volumes = read_volumes(r, doc, ())
    buckets = read_buckets(r, doc, ())
    if r.issues or idle_after is None or not _complete(
            job["name"], job["priority"], job["preemptible"], job["expected_duration_s"], place["vendor"], image, env,
            resources, home, volumes, buckets, *secrets.values()):
        return ReadResult(None, top_locate)
    role = RoleSpec(name=NOTEBOOK_ROLE, image=image, env=env, min_replicas=1, max_replicas=1, volumes=volumes,
                    buckets=buckets, **secrets, **place, **resources)
    notebook = NotebookSpec(home_mib=home, idle_after_s=None if idle_after is MISSING else idle_after)
    return ReadResult(JobSpec(type=kinds.DEFAULT_LAUNCH_TYPE, roles=(role,), kind=kind, notebook=notebook, **job),
                      top_locate)


def _read_home(r: Reader, doc: dict[str, Any]) -> int | None:
    if doc.get("home") is None:
        return DEFAULT_HOME_MIB
    home = r.mapping(doc["home"], ("home",), _("the home volume's size, e.g. {size: 20Gi}"))
    if home is None:
        return None
    r.check_keys(home, ("home",), HOME_KEYS, where="home")
    size = r.quantity(home, ("home",), "size", parse_memory, DEFAULT_HOME_MIB)
    if isinstance(size, int) and not MIN_HOME_MIB <= size <= MAX_HOME_MIB:
        r.error(("home", "size"), _("%(name)s (%(value)s) must be from %(lo)s to %(hi)s") % {
            "name": "home.size", "value": format_memory(size), "lo": format_memory(MIN_HOME_MIB),
            "hi": format_memory(MAX_HOME_MIB)})
        return None
    return size


# -- inference -------------------------------------------------------------------------------------


def read_inference(r: Reader, kind: str) -> ReadResult:
    """An inference service's document, as a spec of `kind`."""
    doc: dict[str, Any] = r.doc.value
    _check_kind_keys(r, doc, kind, INFERENCE_KEYS)
    job = _job_fields(r, doc)
    server = r.choice(doc, (), "server", SERVERS, default="vllm", fold_case=True)
    image_default, port_default, health_default = SERVER_DEFAULTS.get(server or "vllm", (None, None, None))
    custom = server == "custom"
    hint = gettext_noop(": a custom server names its image, port and healthPath")
    for key in ("image", "port", "healthPath"):
        if custom and doc.get(key) is None:
            r.required(doc, (), key, hint)
    image = _image(r, doc, image_default)
    port = r.integer(doc, (), "port", lo=1, hi=65535, default=port_default)
    health = r.text(doc, (), "healthPath", pattern=HEALTH_PATH_RE, default=health_default,
                    hint=gettext_noop("a path such as /health"))
    command = read_command(r, doc, ())
    env = read_env(r, doc, ())
    secrets = {"secret_env": read_secret_env(r, doc, ()), "secret_mounts": read_secret_mounts(r, doc, ())}
    model = _read_model(r, doc, server)
    place = _placement(r, doc)
    resources, limit = _read_server_resources(r, doc, place["vendor"])
    replicas = read_replicas(r, doc, ())
    target = _read_target(r, doc)
    delay = _bounded_duration(r, doc, "scaleDownDelay", 1, MAX_SCALE_DOWN_DELAY_S, DEFAULT_SCALE_DOWN_DELAY_S)
    limits = _read_limits(r, doc)
    volumes = read_volumes(r, doc, ())
    buckets = read_buckets(r, doc, ())
    if r.issues or not _complete(job["name"], job["priority"], job["preemptible"], job["expected_duration_s"],
                                 place["vendor"], server, image, port, health, command, env, model, resources,
                                 limit, replicas, target, delay, limits, volumes, buckets, *secrets.values()):
        return ReadResult(None, top_locate)
    role = RoleSpec(name=SERVER_ROLE, image=image, command=command, env=env, min_replicas=replicas[0],
                    max_replicas=replicas[1], volumes=volumes, buckets=buckets, **secrets, **place, **resources)
    path, registry, served = model
    inference = InferenceSpec(
        server=server, port=port, health_path=health, model_path=path, model_registry=registry, model_name=served,
        gpu_mem_limit_mib=limit or None, target_metric=target[0], target_value=target[1], scale_down_delay_s=delay,
        requests_per_minute=limits[0], tokens_per_minute=limits[1])
    return ReadResult(JobSpec(type="single", roles=(role,), kind=kind, inference=inference, **job),
                      top_locate)


def _read_model(r: Reader, doc: dict[str, Any], server: str | None) -> Any:
    """(path, registry, served name); the model is required unless the server is a custom image."""
    if doc.get("model") is None:
        if server in ("vllm", "triton"):
            r.error(("model",), _("model is required with server %(server)s: "
                                  "{path: /models/...} on a volume or {registry: ...}") % {"server": server})
            return None
        return (None, None, None)
    model = r.mapping(doc["model"], ("model",), _("path or registry, e.g. {path: /models/llama-3-8b}"))
    if model is None:
        return None
    r.check_keys(model, ("model",), MODEL_KEYS, where="model")
    before = len(r.issues)
    path = r.text(model, ("model",), "path", pattern=MODEL_PATH_RE,
                  hint=gettext_noop("an absolute path on a volume, such as /models/llama-3-8b"))
    if isinstance(path, str) and ".." in path.split("/"):
        r.error(("model", "path"), _("model.path must not contain '..'"))
    registry = r.text(model, ("model",), "registry", pattern=IMAGE_RE,
                      hint=gettext_noop("a registry reference such as hf.co/meta-llama/Meta-Llama-3-8B"))
    served = r.text(model, ("model",), "name", pattern=SERVED_NAME_RE,
                    hint=gettext_noop("the name clients ask for, such as llama-3-8b"))
    given = [k for k in ("path", "registry") if model.get(k) is not None]
    if len(given) != 1:
        where = ("model", given[1]) if len(given) == 2 else ("model",)
        r.error(where, _("model needs exactly one of path and registry, not both") if given
                else _("model needs exactly one of path and registry"))
    return (path, registry, served) if len(r.issues) == before else None


def _read_server_resources(r: Reader, doc: dict[str, Any], vendor: str | None) -> tuple[Any, Any]:
    """The role's resources, plus a fraction's burstable memory limit (MiB, 0 when none)."""
    raw = doc.get("resources")
    view = doc
    limit_raw = None
    if isinstance(raw, dict) and BURST_KEY in raw:
        limit_raw = raw[BURST_KEY]
        view = {**doc, "resources": {k: v for k, v in raw.items() if k != BURST_KEY}}
    resources = read_resources(r, view, (), vendor)
    res_path = ("resources",)
    limit = r.quantity(raw, res_path, BURST_KEY, parse_memory, 0) if limit_raw is not None else 0
    if resources is None or limit is None:
        return None, limit
    sharing = resources["sharing"]
    if sharing == "fraction" and resources.get("gpu_mem_mib") is None:
        r.error((*res_path, "gpuMemory"), _("resources.gpuMemory is required for an inference server on a fraction: "
                                            "the memory its model needs (see the GPU advice)"))
        return None, limit
    if limit:
        if sharing != "fraction":
            r.error((*res_path, BURST_KEY), _("%(field)s applies only to sharing fraction") % {
                "field": f"resources.{BURST_KEY}"})
            return resources, None
        if limit < resources["gpu_mem_mib"]:
            r.error((*res_path, BURST_KEY), _("%(field)s (%(limit)s) is less than resources.gpuMemory (%(memory)s)") % {
                "field": f"resources.{BURST_KEY}", "limit": format_memory(limit),
                "memory": format_memory(resources["gpu_mem_mib"])})
            return resources, None
    return resources, limit


def _read_target(r: Reader, doc: dict[str, Any]) -> Any:
    """(metric, value): in-flight requests per replica, requests per second per replica, requests waiting per
    replica, or the time to first token at p95 in seconds."""
    if doc.get("target") is None:
        return ("concurrency", 4.0)
    choices = ", ".join(TARGET_METRICS)
    target = r.mapping(doc["target"], ("target",), _("one of %(choices)s, e.g. {concurrency: 4}") % {
        "choices": choices})
    if target is None:
        return None
    r.check_keys(target, ("target",), TARGET_METRICS, where="target")
    given = [k for k in TARGET_METRICS if k in target]
    if len(given) != 1:
        where = ("target", given[1]) if len(given) >= 2 else ("target",)
        r.error(where, _("target needs exactly one of %(choices)s") % {"choices": choices})
        return None
    metric = given[0]
    if metric in ("concurrency", "queueDepth"):
        value = r.integer(target, ("target",), metric, lo=1, hi=MAX_TARGET_CONCURRENCY, default=None)
        return None if value is None else (metric, float(value))
    value = target[metric]
    most = MAX_TARGET_RPS if metric == "rps" else MAX_TARGET_TTFT_S
    if not is_number(value) or not math.isfinite(value) or not 0 < value <= most:
        r.error(("target", metric), _("target.%(metric)s must be a number above 0 and at most %(most)s, not "
                                      "%(value)s") % {"metric": metric, "most": most, "value": show(value)})
        return None
    return (metric, float(value))


def _read_limits(r: Reader, doc: dict[str, Any]) -> Any:
    """(requests per minute, tokens per minute) over all the service's callers, each None for no limit."""
    if doc.get("limits") is None:
        return (None, None)
    limits = r.mapping(doc["limits"], ("limits",), _("requestsPerMinute and tokensPerMinute, e.g. "
                                                     "{requestsPerMinute: 600}"))
    if limits is None:
        return None
    r.check_keys(limits, ("limits",), LIMIT_KEYS, where="limits")
    requests = r.integer(limits, ("limits",), "requestsPerMinute", lo=1, hi=MAX_REQUESTS_PER_MINUTE, default=MISSING)
    tokens = r.integer(limits, ("limits",), "tokensPerMinute", lo=1, hi=MAX_TOKENS_PER_MINUTE, default=MISSING)
    if requests is None or tokens is None:
        return None
    return (None if requests is MISSING else requests, None if tokens is MISSING else tokens)


# -- back to the clean form ------------------------------------------------------------------------


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def kind_to_dict(spec: JobSpec, role: dict[str, Any], *, head: dict[str, Any] | None = None,
                 command: bool = False) -> dict[str, Any]:
    """The clean-form fields every one-role kind (a notebook, a service) writes; `role` is its role as a
    training role's dict (spec_to_dict's), whose fields move to the top level. The kind's own fields:
    `head` before the image, the role's command where `command` (its document states one), and the rest
    after these (scheduling.kinds, each kind's `to_dict`)."""
    out: dict[str, Any] = {"kind": spec.kind, "name": spec.name}
    if spec.queue is not None:
        out["queue"] = spec.queue
    out["priority"] = spec.priority
    out["preemptible"] = spec.preemptible
    out["expectedDuration"] = format_duration(spec.expected_duration_s)
    out.update(life_to_dict(spec))
    if spec.termination_grace_s != DEFAULT_GRACE_S:
        out["terminationGracePeriod"] = format_duration(spec.termination_grace_s)
    out.update(head or {})
    out["image"] = role["image"]
    if command and "command" in role:
        out["command"] = role["command"]
    if "env" in role:
        out["env"] = role["env"]
    if "secretMounts" in role:
        out["secretMounts"] = role["secretMounts"]
    out.update({k: role[k] for k in SLICE_KEYS if k in role})
    if "volumes" in role:
        out["volumes"] = role["volumes"]
    if "buckets" in role:
        out["buckets"] = role["buckets"]
    return out


def notebook_to_dict(spec: JobSpec, role: dict[str, Any]) -> dict[str, Any]:
    """A notebook's clean-form object."""
    out = kind_to_dict(spec, role)
    out["home"] = {"size": format_memory(spec.notebook.home_mib)}
    if spec.notebook.idle_after_s is not None:
        out["idleAfter"] = format_duration(spec.notebook.idle_after_s)
    return out


def service_to_dict(spec: JobSpec, role: dict[str, Any]) -> dict[str, Any]:
    """An inference service's clean-form object."""
    serving = spec.inference
    out = kind_to_dict(spec, role, head={"server": serving.server}, command=True)
    out["port"] = serving.port
    out["healthPath"] = serving.health_path
    model: dict[str, Any] = {}
    if serving.model_path is not None:
        model["path"] = serving.model_path
    if serving.model_registry is not None:
        model["registry"] = serving.model_registry
    if serving.model_name is not None:
        model["name"] = serving.model_name
    if model:
        out["model"] = model
    if serving.gpu_mem_limit_mib:
        out["resources"] = {**out["resources"], BURST_KEY: format_memory(serving.gpu_mem_limit_mib)}
    out["replicas"] = role["replicas"]
    out["target"] = {serving.target_metric: _number(serving.target_value)}
    out["scaleDownDelay"] = format_duration(serving.scale_down_delay_s)
    limits = {key: value for key, value in zip(LIMIT_KEYS, (serving.requests_per_minute, serving.tokens_per_minute),
                                               strict=True) if value is not None}
    if limits:
        out["limits"] = limits
    return out


# -- what the scheduler is asked for --------------------------------------------------------------


def service_requests(spec: JobSpec, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored core requests of a service (`spec/requests.py` makes them for any job).

    A service's role keeps its declared range as `scale_min`/`scale_max` and asks the core for
    `service_bounds(scale_min, scale_max, desired)` replicas: it starts at its minimum (one at least, the
    core has no job of zero replicas) and the autoscaler raises `max_replicas` to what it wants; the
    replicas above `min_replicas` are elastic, so they go first when others reclaim.
    """
    out = []
    for request in requests:
        low, high = request["min_replicas"], request["max_replicas"]
        core_low, core_high = service_bounds(low, high, low) or (1, 1)
        out.append({**request, "kind": spec.kind, "scale_min": low, "scale_max": high,
                    "min_replicas": core_low, "max_replicas": core_high,
                    # a quoted option may hold the service on another mode: a burst applies to fractions only
                    "gpu_mem_limit_mib": (spec.inference.gpu_mem_limit_mib or 0) if request["mode"] == "fraction"
                    else 0})
    return out


def service_bounds(scale_min: int, scale_max: int, desired: int) -> tuple[int, int] | None:
    """The core's (min_replicas, max_replicas) for a service that wants `desired` replicas, or None
    when it wants none (scaled to zero: the service asks the core for nothing).

    The core's gang minimum is the declared min (one when it is 0: a replica must start for the
    first request); the replicas up to `desired` above it are elastic."""
    desired = max(scale_min, min(desired, scale_max))
    if desired == 0:
        return None
    return max(1, scale_min), desired
