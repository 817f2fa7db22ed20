"""Job specs: parse YAML, a JSON object or the image form into one validated JobSpec.

Two document forms are accepted and told apart by their keys:
  - the clean form (name, type, queue, priority, ..., roles[]) documented in docs/reference/task-yaml.md;
  - the seed's task form (TaskName, TaskType, MinReplicas, ..., WorkerMaxReplicas).
Every problem comes back at once in a SpecError, each naming its field, line and column.
Pure module: no Django import.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml
from django.utils.translation import gettext as _

from scheduling import kinds as workload_kinds
from scheduling.spec.buckets import buckets_to_list
from scheduling.spec.checkpoint import checkpoint_to_dict
from scheduling.spec.cluster import ClusterInfo, PoolInfo, check_cluster, check_document
from scheduling.spec.deadline import deadline_to_dict
from scheduling.spec.kind_forms import form_namer, kind_form_document, kind_form_values
from scheduling.spec.kinds import read_any_clean
from scheduling.spec.lifecycle import life_to_dict
from scheduling.spec.load import MAX_BYTES, Loaded, Path, load_object, load_yaml
from scheduling.spec.model import (
    DEFAULT_GRACE_S,
    DEFAULT_KEEP_LAST,
    JobSpec,
    RetrySpec,
    RoleSpec,
    SpecError,
    SpecIssue,
    SpecNeverRuns,
)
from scheduling.spec.read import CLEAN_KEYS, MISSING, SEED_KEYS, Reader, dotted, read_seed
from scheduling.spec.schedule import SCHEDULE_KEY, read_schedule
from scheduling.spec.tensorboard import tensorboard_to_dict
from scheduling.spec.units import format_cpu, format_duration, format_gpu_milli, format_memory
from scheduling.spec.volumes import mounts_to_list

__all__ = [
    "MAX_BYTES",
    "ClusterInfo",
    "IMAGE_FORM_FIELDS",
    "JobSpec",
    "PoolInfo",
    "RoleSpec",
    "SpecError",
    "SpecNeverRuns",
    "SpecIssue",
    "parse_job_spec",
    "parse_job_spec_obj",
    "image_form_values",
    "spec_from_image_form",
    "dict_to_yaml",
    "spec_to_dict",
    "spec_to_yaml",
    "validate_spec",
]

Queues = Collection[str]
Secrets = Collection[str]


def parse_job_spec(
    text: str | bytes, *, cluster: ClusterInfo | None = None, workspace_queues: Queues | None = None,
    workspace_secrets: Secrets | None = None,
) -> JobSpec:
    """YAML text (either form) -> JobSpec, or SpecError with every problem and its line/column.

    With `cluster`, also rejects what no pool can run; with `workspace_queues`, a queue the
    workspace may not use; with `workspace_secrets`, a secret the workspace does not have.
    """
    return _read(load_yaml(text), dotted, cluster, workspace_queues, workspace_secrets)


def parse_job_spec_obj(
    obj: Mapping[str, Any], *, cluster: ClusterInfo | None = None, workspace_queues: Queues | None = None,
    workspace_secrets: Secrets | None = None,
) -> JobSpec:
    """A JSON object body with the same fields (either form); errors carry no line/column."""
    return _read(load_object(obj), dotted, cluster, workspace_queues, workspace_secrets)


def validate_spec(
    spec: JobSpec, *, cluster: ClusterInfo | None = None, workspace_queues: Queues | None = None
) -> list[SpecIssue]:
    """Re-check an already parsed spec against the cluster (e.g. at submit time)."""
    reader = Reader(Loaded({}))
    locate = workload_kinds.kind_of(spec).locate(spec)
    for problem in check_cluster(spec, cluster, workspace_queues):
        reader.error_at_first(locate(problem), problem.message)
    return reader.issues


def _read(
    loaded: Loaded, namer: Callable[[Path], str], cluster: ClusterInfo | None, workspace_queues: Queues | None,
    workspace_secrets: Secrets | None = None,
) -> JobSpec:
    loaded, schedule_block = _without_schedule(loaded)
    reader = Reader(loaded, namer, known_secrets=workspace_secrets)
    schedule = read_schedule(reader, schedule_block) if schedule_block is not MISSING else None
    keys = list(loaded.value)
    seed = [k for k in keys if k in SEED_KEYS]
    clean = [k for k in keys if k in CLEAN_KEYS]
    if seed and clean:
        reader.error(
            (clean[0],),
            _("the spec mixes task-form fields (%(seed)s) with clean-form fields (%(clean)s); use one form") % {
                "seed": ", ".join(seed), "clean": ", ".join(clean)},
            key=True,
        )
        raise SpecError(reader.issues)
    # Neither form's keys: guess from the spelling so the "did you mean" hints fit.
    seed_folded = {k.casefold() for k in SEED_KEYS}
    use_seed = bool(seed) or (not clean and any(k[:1].isupper() or k.casefold() in seed_folded for k in keys))
    result = read_seed(reader) if use_seed else read_any_clean(reader)
    if result.spec is None:
        said = {issue.field for issue in reader.issues}
        for path, message in check_document(loaded.value, cluster, workspace_queues):
            if reader.namer(path) not in said:   # a field already refused is not refused twice
                reader.error(path, message)
        raise SpecError(reader.issues or [SpecIssue(None, None, None, _("the spec is not valid"))])
    well_formed = not reader.issues
    for problem in check_cluster(result.spec, cluster, workspace_queues):
        reader.error_at_first(result.locate(problem), problem.message)
    # read well, but this cluster could never run it
    never_runs = len(reader.issues) if well_formed else 0
    refusal = workload_kinds.kind_of(result.spec).schedule_refusal() if schedule_block is not MISSING else None
    if refusal:
        reader.error((SCHEDULE_KEY,), refusal, key=True)
    if reader.issues:
        raise (SpecNeverRuns if never_runs == len(reader.issues) else SpecError)(reader.issues)
    return replace(result.spec, schedule=schedule) if schedule else result.spec


def _without_schedule(loaded: Loaded) -> tuple[Loaded, Any]:
    """The document without its `schedule` block (positions kept), and the block (MISSING: none)."""
    if not isinstance(loaded.value, dict) or SCHEDULE_KEY not in loaded.value:
        return loaded, MISSING
    rest = {key: value for key, value in loaded.value.items() if key != SCHEDULE_KEY}
    return Loaded(rest, loaded.value_pos, loaded.key_pos), loaded.value[SCHEDULE_KEY]


# -- the image form --------------------------------------------------------------------------

# Image form field -> where it goes in the clean form (errors are named by form field).
IMAGE_FORM_FIELDS: dict[str, Path] = {
    "name": ("name",),
    "image": ("roles", 0, "image"),
    "command": ("roles", 0, "command"),
    "gpus": ("roles", 0, "resources", "gpu"),
    "sharing": ("roles", 0, "sharing"),
    "gpuMemory": ("roles", 0, "resources", "gpuMemory"),
    "mig": ("roles", 0, "resources", "mig"),
    "cpu": ("roles", 0, "resources", "cpu"),
    "memory": ("roles", 0, "resources", "memory"),
    "minReplicas": ("roles", 0, "replicas", "min"),
    "maxReplicas": ("roles", 0, "replicas", "max"),
    "vendor": ("roles", 0, "vendor"),
    "gpuModel": ("roles", 0, "gpuModel"),
    "nodePool": ("roles", 0, "nodePool"),
    "priority": ("priority",),
    "reduceCost": ("reduceCost",),
    "queue": ("queue",),
    "expectedDuration": ("expectedDuration",),
    # a schedule of the job (spec/schedule.py); keepLast and suspend are written in YAML
    "scheduleCron": ("schedule", "cron"),
    "scheduleTimeZone": ("schedule", "timeZone"),
    "scheduleConcurrency": ("schedule", "concurrency"),
    # dependencies and arrays: "after" is "JOB[:CONDITION], ..." (spec/chain.py reads what it becomes)
    "after": ("after",),
    "arrayIndices": ("array", "indices"),
    "arrayParallelism": ("array", "parallelism"),
    # the job's life (spec/lifecycle.py): the form gives a retry limit with the default back-off
    "maxRuntime": ("maxRuntime",),
    "retryLimit": ("retry", "limit"),
    "ttlAfterFinished": ("ttlAfterFinished",),
    # a graceful stop and checkpoints (spec/checkpoint.py); the form writes `checkpoint`, not the older
    # `checkpointPath` (hence the field's name)
    "gracePeriod": ("terminationGracePeriod",),
    "checkpointPathField": ("checkpoint", "path"),
    "checkpointVolume": ("checkpoint", "volume"),
    "checkpointEvery": ("checkpoint", "every"),
    # a deadline (spec/deadline.py): one of the two
    "completeBy": ("completeBy",),
    "completeWithin": ("completeWithin",),
}
_ARRAY_FORM_FIELDS = ("arrayIndices", "arrayParallelism")
_NESTED_TOP_KEYS = (SCHEDULE_KEY, "checkpoint")  # form fields whose path is (top-level key, its key)
_FORM_NAME_OF = {path: name for name, path in IMAGE_FORM_FIELDS.items()}
_TRUE = {"true", "on", "yes", "1"}
_FALSE = {"false", "off", "no", "0"}


def _form_namer(path: Path) -> str:
    return _FORM_NAME_OF.get(path) or dotted(path)


def _name_from_image(image: str) -> str:
    """pytorch/pytorch:2.4.0-cuda12.1 -> pytorch; registry.io/team/Train_Job:1 -> train-job."""
    base = re.split(r"[:@]", image.rsplit("/", 1)[-1])[0].lower()
    base = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:63].strip("-")
    return base or "job"


def spec_from_image_form(
    form: Mapping[str, Any], *, cluster: ClusterInfo | None = None, workspace_queues: Queues | None = None,
    workspace_secrets: Secrets | None = None,
) -> JobSpec:
    """The portal's image form (values may be strings, as posted) -> JobSpec.

    Keys are those of IMAGE_FORM_FIELDS; blank values mean "default". Errors name the form
    field (e.g. "gpus"), not a YAML path. `kind` (notebook, inference; default training) picks the
    tab: a notebook's or a service's fields are its kind's `form_fields` (scheduling.kinds).
    """
    name = form.get("kind")
    name = name.strip() if isinstance(name, str) else name
    kind = workload_kinds.find(name or workload_kinds.DEFAULT)
    if kind is None or kind.form_template is None:  # a kind without a tab is written as YAML
        raise SpecError([SpecIssue(None, None, "kind", _("kind: %(kind)s is not one of %(kinds)s") % {
            "kind": repr(name), "kinds": ", ".join(k.name for k in workload_kinds.all() if k.form_template)})])
    if kind.form_fields is not None:
        doc, problems = kind_form_document(kind, form)
        if problems:
            raise SpecError(problems)
        return _read(load_object(doc), form_namer(kind), cluster, workspace_queues, workspace_secrets)
    form = {k: v for k, v in form.items() if k != "kind"}
    issues: list[SpecIssue] = []

    def bad(key: str, message: str) -> None:
        issues.append(SpecIssue(None, None, key, f"{key}: {message}"))

    values: dict[str, Any] = {}
    for key, value in form.items():
        if key not in IMAGE_FORM_FIELDS:
            bad(key, _("unknown form field '%(key)s'") % {"key": key})
            continue
        if isinstance(value, str):
            value = value.strip()
            if value == "":
                continue
        if value is None:
            continue
        values[key] = _coerce_form_value(key, value, bad)

    if issues:
        raise SpecError(issues)
    image = values.get("image")
    doc: dict[str, Any] = {
        "kind": kind.name,  # the roles tab: training's, or another kind's written with roles
        "name": values.get("name") or (_name_from_image(image) if isinstance(image, str) else "job"),
        "type": workload_kinds.DEFAULT_LAUNCH_TYPE,
    }
    role: dict[str, Any] = {"name": "main"}
    if "retryLimit" in values:
        doc["retry"] = {"limit": values.pop("retryLimit")}
    for key, path in IMAGE_FORM_FIELDS.items():
        if key in values and path[0] in _NESTED_TOP_KEYS:
            doc.setdefault(path[0], {})[path[1]] = values[key]
        elif key in _ARRAY_FORM_FIELDS and key in values:
            doc.setdefault("array", {})[path[-1]] = values[key]
        elif key in values and key != "name":
            target = doc if len(path) == 1 else role
            for part in path[2:-1] if len(path) > 1 else ():
                target = target.setdefault(part, {})
            target[path[-1]] = values[key]
    doc["roles"] = [role]
    return _read(load_object(doc), _form_namer, cluster, workspace_queues, workspace_secrets)


def image_form_values(spec: JobSpec) -> tuple[dict[str, str], list[str]]:
    """The image form's fields for a spec, as text the form shows (blank: the default), and what
    of the spec the form cannot show (filling the form in again would drop it). `kind` says which
    tab shows it."""
    kind = workload_kinds.kind_of(spec)
    if kind.form_fields is not None:
        return kind_form_values(kind, spec)
    role = spec.roles[0]
    hidden = []
    if spec.type != workload_kinds.DEFAULT_LAUNCH_TYPE:  # the form writes the default type only
        hidden.append(f"type {spec.type}")
    if len(spec.roles) > 1:
        hidden.append(f"{len(spec.roles)} roles")
    if role.name != "main":
        hidden.append(f"the role name '{role.name}'")
    if role.env or role.secret_env:
        hidden.append("env")
    if role.secret_mounts:
        hidden.append("secretMounts")
    if role.volumes:
        hidden.append("volumes")
    if role.buckets:
        hidden.append("buckets")
    if spec.preemptible != spec.reduce_cost:
        hidden.append(f"preemptible: {str(spec.preemptible).lower()}")
    checkpoint = spec.checkpoint
    if checkpoint is not None and checkpoint.every_s is None:
        # the older spelling has no interval; the form's fields would give it the default one
        hidden.append("checkpointPath")
        checkpoint = None
    if spec.topology is not None:
        hidden.append("topology")
    plan = spec.schedule
    if plan is not None and (plan.keep_last != DEFAULT_KEEP_LAST or plan.suspend):
        hidden.append("schedule.keepLast, schedule.suspend")
    if spec.retry is not None and spec.retry != RetrySpec(limit=spec.retry.limit):
        hidden.append("retry")
    if role.sharing == "mig":
        gpus = ""
    elif role.sharing == "fraction":
        gpus = str(format_gpu_milli(role.gpu_milli))
    else:
        gpus = str(role.num_gpus)
    values = {
        "kind": spec.kind,
        "name": spec.name,
        "image": role.image,
        "command": shlex.join(role.command),
        "gpus": gpus,
        "sharing": role.sharing,
        "gpuMemory": format_memory(role.gpu_mem_mib) if role.sharing == "fraction" and role.gpu_mem_mib else "",
        "mig": role.mig_profile or "" if role.sharing == "mig" else "",
        "cpu": str(format_cpu(role.cpu_milli)),
        "memory": format_memory(role.mem_mib),
        "minReplicas": str(role.min_replicas),
        "maxReplicas": str(role.max_replicas),
        "vendor": role.vendor,
        "gpuModel": role.gpu_model or "",
        "nodePool": role.node_pool or "",
        "priority": str(spec.priority),
        "reduceCost": "true" if spec.reduce_cost else "false",
        "queue": spec.queue or "",
        "expectedDuration": format_duration(spec.expected_duration_s),
        "scheduleCron": plan.cron if plan else "",
        "scheduleTimeZone": (plan.time_zone or "") if plan else "",
        "scheduleConcurrency": plan.concurrency if plan else "",
        "after": ", ".join(f"{a.job}:{a.condition}" for a in spec.after),
        "arrayIndices": spec.array.indices if spec.array else "",
        "arrayParallelism": str(spec.array.parallelism) if spec.array else "",
        "maxRuntime": format_duration(spec.max_runtime_s) if spec.max_runtime_s else "",
        "retryLimit": str(spec.retry.limit) if spec.retry is not None else "",
        "ttlAfterFinished": format_duration(spec.ttl_after_finished_s) if spec.ttl_after_finished_s else "",
        "gracePeriod": "" if spec.termination_grace_s == DEFAULT_GRACE_S else (
            format_duration(spec.termination_grace_s) if spec.termination_grace_s else "0"),
        "checkpointPathField": checkpoint.path if checkpoint else "",
        "checkpointVolume": (checkpoint.volume or "") if checkpoint else "",
        "checkpointEvery": format_duration(checkpoint.every_s) if checkpoint and checkpoint.every_s else "",
        "completeBy": (spec.deadline.at or "") if spec.deadline else "",
        "completeWithin": format_duration(spec.deadline.within_s) if spec.deadline and spec.deadline.within_s
        else "",
    }
    return values, hidden


def _coerce_form_value(key: str, value: Any, bad: Any) -> Any:
    """HTML forms post text; turn numbers, booleans and commands into what the spec expects."""
    if not isinstance(value, str):
        return value
    if key == "gpus":
        try:
            number = Decimal(value)
        except InvalidOperation:
            number = None
        if number is None or not number.is_finite():
            bad(key, _("'%(value)s' is not a number of GPUs (e.g. 1, 2 or 0.5)") % {"value": value})
            return None
        return int(number) if number == number.to_integral_value() else float(number)
    if key == "after":   # "prepare-data:succeeded, 1234" -> [{job, condition}, ...]
        entries = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            job, _sep, condition = part.partition(":")
            entries.append({"job": job.strip(), **({"condition": condition.strip()} if condition.strip() else {})})
        return entries
    if key in ("minReplicas", "maxReplicas", "priority", "arrayParallelism", "retryLimit"):
        if not re.fullmatch(r"[0-9]{1,6}", value):
            bad(key, _("'%(value)s' is not a whole number") % {"value": value})
            return None
        return int(value)
    if key == "gracePeriod" and re.fullmatch(r"0+[smhd]?", value):
        return 0  # no grace at all (the spec takes it as the number 0 only)
    if key == "reduceCost":
        if value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        bad(key, _("'%(value)s' is not true or false") % {"value": value})
        return None
    if key == "command":
        try:
            return shlex.split(value)
        except ValueError as exc:
            bad(key, _("cannot split the command: %(error)s") % {"error": exc})
            return None
    return value


# -- back to YAML ------------------------------------------------------------------------------


def role_to_dict(role: RoleSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": role.name, "image": role.image}
    if role.command:
        out["command"] = list(role.command)
    if role.env or role.secret_env:
        out["env"] = {**dict(role.env), **{var: {"secret": name} for var, name in role.secret_env}}
    if role.secret_mounts:
        out["secretMounts"] = [{"secret": name, "mountPath": path} for name, path in role.secret_mounts]
    out["replicas"] = {"min": role.min_replicas, "max": role.max_replicas}
    out["sharing"] = role.sharing
    resources: dict[str, Any] = {}
    if role.sharing == "mig":
        resources["mig"] = role.mig_profile
    elif role.sharing == "fraction":
        resources["gpu"] = format_gpu_milli(role.gpu_milli)
        if role.gpu_mem_mib is not None:
            resources["gpuMemory"] = format_memory(role.gpu_mem_mib)
    else:
        resources["gpu"] = role.num_gpus
    resources["cpu"] = format_cpu(role.cpu_milli)
    resources["memory"] = format_memory(role.mem_mib)
    out["resources"] = resources
    out["vendor"] = role.vendor
    if role.gpu_model is not None:
        out["gpuModel"] = role.gpu_model
    if role.node_pool is not None:
        out["nodePool"] = role.node_pool
    if role.volumes:
        out["volumes"] = mounts_to_list(role.volumes)
    if role.buckets:
        out["buckets"] = buckets_to_list(role.buckets)
    return out


def spec_to_dict(spec: JobSpec) -> dict[str, Any]:
    """The clean-form object of a spec; parse_job_spec_obj(spec_to_dict(s)) == s."""
    out = workload_kinds.kind_of(spec).to_dict(spec)
    if spec.schedule is not None:  # a schedule's runs are stored without it (scheduling.schedules)
        out[SCHEDULE_KEY] = spec.schedule.to_dict()
    return out


def roles_to_dict(spec: JobSpec) -> dict[str, Any]:
    """The clean-form object of a spec written with roles (training's)."""
    out: dict[str, Any] = {"name": spec.name, "type": spec.type}
    if spec.queue is not None:
        out["queue"] = spec.queue
    out["priority"] = spec.priority
    out["preemptible"] = spec.preemptible
    out["reduceCost"] = spec.reduce_cost
    out["expectedDuration"] = format_duration(spec.expected_duration_s)
    out["roles"] = [role_to_dict(r) for r in spec.roles]
    if spec.checkpoint is not None:
        key, value = checkpoint_to_dict(spec.checkpoint)
        out[key] = value
    if spec.termination_grace_s != DEFAULT_GRACE_S:
        out["terminationGracePeriod"] = format_duration(spec.termination_grace_s)
    if spec.tensorboard is not None:
        out["tensorboard"] = tensorboard_to_dict(spec.tensorboard)
    if spec.topology is not None:
        out["topology"] = spec.topology.to_dict()
    if spec.deadline is not None:
        key, value = deadline_to_dict(spec.deadline)
        out[key] = value
    if spec.after:
        out["after"] = [a.to_dict() for a in spec.after]
    if spec.array is not None:
        out["array"] = spec.array.to_dict()
    out.update(life_to_dict(spec))
    return out


def spec_to_yaml(spec: JobSpec) -> str:
    """The clean-form YAML of a spec (what the image form and the task form correspond to)."""
    return dict_to_yaml(spec_to_dict(spec))


def dict_to_yaml(out: Mapping[str, Any]) -> str:
    """`spec_to_yaml` of the spec whose `spec_to_dict` is `out`."""
    # libyaml's emitter when built in: the pure-Python one is most of a batch submit's time
    return yaml.dump(out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                     default_flow_style=None, allow_unicode=True, width=4096)
