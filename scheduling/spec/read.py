"""Readers that turn a loaded document (clean form or the seed's task form) into a JobSpec.

Every problem is recorded with the field's path and position and reading goes on, so one
pass reports all errors. Messages are in the active language (gettext; English is the msgid, word for
word); field names, values and YAML words stay as written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from scheduling.core.units import MILLI_PER_GPU, gpu_model_name
from scheduling.kinds.launch_types import DEFAULT as DEFAULT_LAUNCH_TYPE  # not the package: kinds import this
from scheduling.kinds.launch_types import MASTER, SEED_TASK_TYPES, WORKER
from scheduling.kinds.launch_types import find as find_launch_type
from scheduling.spec.cluster import ClusterProblem, did_you_mean
from scheduling.spec.lifecycle import read_batch_life
from scheduling.spec.load import Loaded, Path, Pos
from scheduling.spec.model import (
    DEFAULT_CPU_MILLI,
    DEFAULT_DURATION_S,
    DEFAULT_MEM_MIB,
    JOB_TYPES,
    SHARING_MODES,
    TOPOLOGY_KINDS,
    VENDORS,
    JobSpec,
    RoleSpec,
    SpecIssue,
    TopologySpec,
)
from scheduling.spec.units import (
    MIG_PROFILE_RE,
    mig_compute_milli,
    mig_memory_mib,
    parse_cpu,
    parse_duration,
    parse_gpu_amount,
    parse_memory,
)

MISSING: Any = object()

# a topology level: a label key ("topology.kubernetes.io/rack") or its last part ("rack")
TOPOLOGY_LEVEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?$")
TOPOLOGY_HINT = gettext_noop("a topology level such as rack, block, nvlink-domain or node, or its label key")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_HINT = gettext_noop("lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit")
IMAGE_HINT = gettext_noop("an image reference such as registry.io/team/train:1.0")
GPU_MODEL_HINT = gettext_noop("a GPU model such as A100-80GB")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:@+]{0,511}$")
MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._\-]{0,62}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MOUNT_PATH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,255}$")
MAX_SECRET_MOUNTS = 16
MAX_REPLICAS = 1024
MAX_GPUS_PER_REPLICA = 64
MAX_ROLES = 8
MAX_TEXT = 1024

CLEAN_KEYS = (
    "name",
    "type",
    "queue",
    "priority",
    "preemptible",
    "reduceCost",
    "expectedDuration",
    "roles",
    "checkpointPath",
    "topology",
    "kind",  # training here; notebook and inference are read by spec/kinds.py
    "after",  # read by spec/chain.py (kinds.read_roles)
    "array",  # read by spec/chain.py (kinds.read_roles)
    # the job's life: spec/lifecycle.py
    "maxRuntime",
    "retry",
    "ttlAfterFinished",
    "checkpoint",  # with checkpointPath and terminationGracePeriod: read by spec/checkpoint.py (kinds.read_roles)
    "terminationGracePeriod",
    "completeBy",  # with completeWithin: read by spec/deadline.py (kinds.read_roles)
    "completeWithin",
    "tensorboard",  # read by spec/tensorboard.py (kinds.read_roles)
)
ROLE_KEYS = (
    "name",
    "image",
    "command",
    "env",
    "secretMounts",
    "replicas",
    "sharing",
    "resources",
    "vendor",
    "gpuModel",
    "nodePool",
    "volumes",  # read by spec/volumes.py (kinds.read_roles)
    "buckets",  # read by spec/buckets.py (kinds.read_roles)
)
REPLICA_KEYS = ("min", "max")
RESOURCE_KEYS = ("gpu", "gpuMemory", "cpu", "memory", "mig")
SEED_KEYS = (
    "TaskName",
    "Priority",
    "TaskType",
    "MinReplicas",
    "MaxReplicas",
    "AMDSupport",
    "ReduceCost",
    "TaskImage",
    "MasterImage",
    "WorkerImage",
    "MasterMaxReplicas",
    "WorkerMaxReplicas",
)

# Where a problem with a RoleSpec attribute points in the clean form, relative to the role:
# the first of these fields the document has (else the first).
CLEAN_ROLE_SOURCES: dict[str, tuple[Path, ...]] = {
    "vendor": (("vendor",), ("nodePool",), ("gpuModel",)),
    "gpu_model": (("gpuModel",),),
    "node_pool": (("nodePool",),),
    "sharing": (("sharing",), ("resources", "mig"), ("resources", "gpu"), ("nodePool",)),
    "num_gpus": (("resources", "gpu"), ("resources",)),
    "gpu_mem_mib": (("resources", "gpuMemory"),),
    "mig_profile": (("resources", "mig"),),
}


def dotted(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def show(value: Any) -> str:
    """A value as the user wrote it, short."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, list):
        return _("a list")
    if isinstance(value, dict):
        return _("a mapping")
    return repr(value)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class Reader:
    """Typed access to a loaded document; records problems instead of raising."""

    doc: Loaded
    namer: Callable[[Path], str] = dotted
    issues: list[SpecIssue] = field(default_factory=list)
    # The names of the workspace's secrets a spec may reference; None: not checked (no workspace).
    known_secrets: Collection[str] | None = None

    def pos(self, path: Path, *, key: bool = False) -> Pos | None:
        if key and path in self.doc.key_pos:
            return self.doc.key_pos[path]
        while True:
            if path in self.doc.value_pos:
                return self.doc.value_pos[path]
            if not path:
                return None
            path = path[:-1]

    def has(self, path: Path) -> bool:
        value = self.doc.value
        for part in path:
            if isinstance(value, dict) and isinstance(part, str) and part in value:
                value = value[part]
            elif isinstance(value, list) and isinstance(part, int) and part < len(value):
                value = value[part]
            else:
                return False
        return True

    def error_at_first(self, paths: tuple[Path, ...], message: str) -> None:
        """Report at the first of `paths` the document has (else the first)."""
        self.error(next((p for p in paths if self.has(p)), paths[0]), message)

    def error(self, path: Path, message: str, *, key: bool = False) -> None:
        pos = self.pos(path, key=key)
        line, col = pos if pos else (None, None)
        name = self.namer(path) if path else None
        if line is None and name and not message.startswith(name):
            message = f"{name}: {message}"  # no position: the field name locates the problem
        self.issues.append(SpecIssue(line, col, name, message))

    # -- structure -------------------------------------------------------------------------

    def check_keys(self, mapping: dict[str, Any], path: Path, allowed: Iterable[str], *, where: str) -> None:
        allowed = tuple(allowed)
        for key in mapping:
            if key not in allowed:
                hint = did_you_mean(key, allowed) or _(" (allowed: %(allowed)s)") % {"allowed": ", ".join(allowed)}
                self.error((*path, key), _("unknown field '%(key)s' in %(where)s%(hint)s") % {
                    "key": key, "where": where, "hint": hint}, key=True)

    def mapping(self, value: Any, path: Path, what: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.error(path, _("%(name)s must be a mapping of %(what)s, not %(value)s") % {
            "name": self.namer(path), "what": what, "value": show(value)})
        return None

    def required(self, mapping: dict[str, Any], path: Path, key: str, hint: str = "") -> Any:
        """`hint`: a msgid (gettext_noop), said in the active language after "... is required"."""
        if key not in mapping or mapping[key] is None:
            self.error((*path, key), _("%(name)s is required%(hint)s") % {
                "name": self.namer((*path, key)), "hint": _(hint) if hint else ""})
            return MISSING
        return mapping[key]

    # -- scalars: each returns the value, `default` when absent, None when invalid ----------

    def text(
        self,
        mapping: dict[str, Any],
        path: Path,
        key: str,
        *,
        required: bool = False,
        pattern: re.Pattern[str] | None = None,
        hint: str = "",
        default: Any = None,
    ) -> Any:
        value = self.required(mapping, path, key) if required else mapping.get(key, MISSING)
        if value is MISSING or (value is None and not required):
            return default
        field_path = (*path, key)
        name = self.namer(field_path)
        if not isinstance(value, str):
            self.error(field_path, _("%(name)s must be text, not %(value)s") % {"name": name, "value": show(value)})
            return None
        if not value.strip():
            self.error(field_path, _("%(name)s is empty") % {"name": name})
            return None
        if len(value) > MAX_TEXT:
            self.error(field_path, _("%(name)s is longer than %(most)s characters") % {"name": name, "most": MAX_TEXT})
            return None
        if pattern is not None and not pattern.fullmatch(value):
            # `hint`: a msgid (gettext_noop)
            self.error(field_path, _("%(name)s %(value)s is not valid: %(hint)s") % {
                "name": name, "value": show(value), "hint": _(hint) if hint else ""})
            return None
        return value

    def integer(
        self, mapping: dict[str, Any], path: Path, key: str, *, lo: int, hi: int, default: Any
    ) -> Any:
        value = mapping.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        field_path = (*path, key)
        name = self.namer(field_path)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            self.error(field_path, _("%(name)s must be a whole number from %(lo)s to %(hi)s, not %(value)s") % {
                "name": name, "lo": lo, "hi": hi, "value": show(value)})
            return None
        if not lo <= value <= hi:
            self.error(field_path, _("%(name)s (%(value)s) must be from %(lo)s to %(hi)s") % {
                "name": name, "value": value, "lo": lo, "hi": hi})
            return None
        return value

    def boolean(self, mapping: dict[str, Any], path: Path, key: str, *, default: Any) -> Any:
        value = mapping.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        if not isinstance(value, bool):
            field_path = (*path, key)
            self.error(field_path, _("%(name)s must be true or false, not %(value)s") % {
                "name": self.namer(field_path), "value": show(value)})
            return None
        return value

    def choice(
        self,
        mapping: dict[str, Any],
        path: Path,
        key: str,
        choices: dict[str, str] | Iterable[str],
        *,
        default: Any,
        fold_case: bool = False,
    ) -> Any:
        value = mapping.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        table = choices if isinstance(choices, dict) else {c: c for c in choices}
        lookup = {k.casefold(): v for k, v in table.items()} if fold_case else table
        probe = value.casefold() if fold_case and isinstance(value, str) else value
        if isinstance(probe, str) and probe in lookup:
            return lookup[probe]
        field_path = (*path, key)
        hint = did_you_mean(value, table) if isinstance(value, str) else ""
        self.error(field_path, _("%(name)s %(value)s is not one of %(choices)s%(hint)s") % {
            "name": self.namer(field_path), "value": show(value), "choices": " | ".join(table), "hint": hint})
        return None

    def quantity(
        self, mapping: dict[str, Any], path: Path, key: str, parse: Callable[[Any], int], default: Any
    ) -> Any:
        value = mapping.get(key, MISSING)
        if value is MISSING or value is None:
            return default
        field_path = (*path, key)
        try:
            return parse(value)
        except ValueError as exc:
            self.error(field_path, f"{self.namer(field_path)} {show(value)} {exc}")
            return None


# -- the clean form ------------------------------------------------------------------------------


@dataclass
class ReadResult:
    spec: JobSpec | None
    locate: Callable[[ClusterProblem], tuple[Path, ...]]  # where a cluster problem may point


def read_clean(r: Reader) -> ReadResult:
    doc: dict[str, Any] = r.doc.value
    r.check_keys(doc, (), CLEAN_KEYS, where=_("the job"))
    name = r.text(doc, (), "name", required=True, pattern=DNS_LABEL, hint=DNS_HINT)
    job_type = r.choice(doc, (), "type", JOB_TYPES, default=DEFAULT_LAUNCH_TYPE)
    queue = r.text(doc, (), "queue", pattern=DNS_LABEL, hint=DNS_HINT)
    priority = r.integer(doc, (), "priority", lo=0, hi=100, default=0)
    reduce_cost = r.boolean(doc, (), "reduceCost", default=False)
    preemptible = r.boolean(doc, (), "preemptible", default=bool(reduce_cost))
    if reduce_cost and preemptible is False:
        r.error(
            ("preemptible",),
            _("preemptible: false conflicts with reduceCost: true (reduced-cost work can always be preempted)"),
        )
    duration = r.quantity(doc, (), "expectedDuration", parse_duration, DEFAULT_DURATION_S)
    topology = read_topology(r, doc)
    life = read_batch_life(r, doc)

    roles: list[RoleSpec | None] = []
    raw_roles = r.required(doc, (), "roles", gettext_noop(": a list of roles (name, image, replicas, resources)"))
    if raw_roles is not MISSING:
        if not isinstance(raw_roles, list):
            r.error(("roles",), _("roles must be a list of roles, not %(value)s") % {"value": show(raw_roles)})
        elif not raw_roles:
            r.error(("roles",), _("roles is empty; give at least one role"))
        elif len(raw_roles) > MAX_ROLES:
            r.error(("roles",), _("roles has %(count)s entries; at most %(most)s") % {
                "count": len(raw_roles), "most": MAX_ROLES})
        else:
            roles = [read_role(r, raw, ("roles", i)) for i, raw in enumerate(raw_roles)]
            check_role_set(r, job_type, raw_roles, roles)

    if r.issues or None in (name, job_type, priority, preemptible, duration) or None in roles:
        return ReadResult(None, clean_locate)
    spec = JobSpec(
        topology=topology,
        name=name,
        type=job_type,
        roles=tuple(roles),
        queue=queue,
        priority=priority,
        preemptible=preemptible,
        reduce_cost=bool(reduce_cost),
        expected_duration_s=duration,
        **life,
    )
    return ReadResult(spec, clean_locate)


def read_topology(r: Reader, doc: dict[str, Any]) -> TopologySpec | None:
    """`topology: {required: LEVEL}` or `{preferred: LEVEL}`; None when absent or wrong (an issue said)."""
    raw = doc.get("topology")
    if raw is None:
        return None
    found = r.mapping(raw, ("topology",), _("required or preferred and a level, e.g. {required: rack}"))
    if found is None:
        return None
    r.check_keys(found, ("topology",), TOPOLOGY_KINDS, where=_("topology"))
    given = [k for k in TOPOLOGY_KINDS if k in found]
    if len(given) != 1:
        if not given and set(found) <= set(TOPOLOGY_KINDS):
            r.error(("topology",), _("topology needs one of required or preferred, e.g. {required: rack}"))
        elif len(given) > 1:
            r.error(("topology", given[1]), _("topology takes required or preferred, not both"))
        return None
    level = r.text(found, ("topology",), given[0], required=True, pattern=TOPOLOGY_LEVEL, hint=TOPOLOGY_HINT)
    if level is None or level is MISSING:
        return None
    return TopologySpec(level, given[0] == "required")


def clean_locate(problem: ClusterProblem) -> tuple[Path, ...]:
    if problem.role is None:
        return ((problem.attr,),)
    role: Path = ("roles", problem.role)
    return tuple((*role, *source) for source in CLEAN_ROLE_SOURCES.get(problem.attr, ((),)))


def check_role_set(
    r: Reader, job_type: str | None, raw_roles: list[Any], roles: list[RoleSpec | None]
) -> None:
    launch_type = find_launch_type(job_type)  # None: the type was wrong (an issue said)
    seen: dict[str, int] = {}
    for i, role in enumerate(roles):
        if role is None:
            continue
        if role.name in seen:
            r.error(("roles", i, "name"), _("role name '%(name)s' is used twice (also roles[%(index)s])") % {
                "name": role.name, "index": seen[role.name]})
        seen.setdefault(role.name, i)
        if launch_type and launch_type.role_names and role.name not in launch_type.role_names:
            r.error(
                ("roles", i, "name"),
                _("a %(type)s job has roles named 'master' and 'worker', not '%(name)s'") % {
                    "type": job_type, "name": role.name},
            )
    if launch_type and launch_type.one_role and len(raw_roles) > 1:
        r.error(("roles",), _("a single job has exactly one role, not %(count)s; use type pytorch or mpi") % {
            "count": len(raw_roles)})
    complete = [role for role in roles if role is not None]
    if complete and len(complete) == len(roles) and sum(role.min_replicas for role in complete) == 0:
        r.error(("roles",), _("every role has replicas.min 0; at least one replica must start"))


def read_role(r: Reader, raw: Any, path: Path) -> RoleSpec | None:
    role = r.mapping(raw, path, _("role fields (name, image, replicas, resources)"))
    if role is None:
        return None
    r.check_keys(role, path, ROLE_KEYS, where=_("a role"))
    name = r.text(role, path, "name", required=True, pattern=DNS_LABEL, hint=DNS_HINT)
    image = r.text(
        role,
        path,
        "image",
        required=True,
        pattern=IMAGE_RE,
        hint=IMAGE_HINT,
    )
    command = read_command(r, role, path)
    env = read_env(r, role, path)
    secret_env = read_secret_env(r, role, path)
    secret_mounts = read_secret_mounts(r, role, path)
    replicas = read_replicas(r, role, path)
    vendor = r.choice(role, path, "vendor", VENDORS, default="nvidia", fold_case=True)
    gpu_model = r.text(role, path, "gpuModel", pattern=MODEL_RE, hint=GPU_MODEL_HINT)
    if gpu_model is not None:
        gpu_model = gpu_model_name(gpu_model)
    node_pool = r.text(role, path, "nodePool", pattern=DNS_LABEL, hint=DNS_HINT)
    resources = read_resources(r, role, path, vendor)
    if (None in (name, image, command, env, secret_env, secret_mounts, replicas, vendor, resources)
            or MISSING in (name, image)):
        return None
    return RoleSpec(
        name=name,
        image=image,
        command=command,
        env=env,
        secret_env=secret_env,
        secret_mounts=secret_mounts,
        min_replicas=replicas[0],
        max_replicas=replicas[1],
        vendor=vendor,
        gpu_model=gpu_model,
        node_pool=node_pool,
        **resources,
    )


def read_command(r: Reader, role: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    value = role.get("command")
    if value is None:
        return ()
    field_path = (*path, "command")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        r.error(field_path, _('%(name)s must be a list of text, e.g. ["python", "train.py"]') % {
            "name": r.namer(field_path)})
        return None
    return tuple(value)


def read_env(r: Reader, role: dict[str, Any], path: Path) -> tuple[tuple[str, str], ...] | None:
    value = role.get("env")
    if value is None:
        return ()
    env = r.mapping(value, (*path, "env"), _("variable names to values"))
    if env is None:
        return None
    pairs = []
    ok = True
    for key, item in env.items():
        item_path = (*path, "env", key)
        if not ENV_NAME_RE.fullmatch(key):
            r.error(
                item_path,
                _("env name '%(key)s' must be letters, digits and '_', not starting with a digit") % {"key": key},
                key=True,
            )
            ok = False
        elif isinstance(item, dict):
            continue  # a secret's value ({secret: name}): read by read_secret_env
        elif is_number(item) and not (isinstance(item, float) and not math.isfinite(item)):
            pairs.append((key, str(item)))
        elif isinstance(item, str):
            pairs.append((key, item))
        else:
            r.error(item_path, _("%(name)s must be text, not %(value)s (quote it)") % {
                "name": r.namer(item_path), "value": show(item)})
            ok = False
    return tuple(pairs) if ok else None


def read_secret_ref(r: Reader, value: Any, path: Path) -> str | None:
    """`{secret: name}`: a secret of the job's workspace (checked when the reader knows them)."""
    ref = r.mapping(value, path, _("secret: the name of one of the workspace's secrets"))
    if ref is None:
        return None
    before = len(r.issues)
    r.check_keys(ref, path, ("secret",), where=r.namer(path))
    name = r.text(ref, path, "secret", required=True, pattern=DNS_LABEL, hint=DNS_HINT)
    if name in (None, MISSING) or len(r.issues) > before:
        return None
    if r.known_secrets is not None and name not in r.known_secrets:
        r.error((*path, "secret"), _("the workspace has no secret '%(name)s'%(hint)s") % {
            "name": name, "hint": did_you_mean(name, r.known_secrets)})
        return None
    return name


def read_secret_env(r: Reader, role: dict[str, Any], path: Path) -> tuple[tuple[str, str], ...] | None:
    """The env entries that take a secret's value: (variable, secret name). The others are read_env's."""
    env = role.get("env")
    if not isinstance(env, dict):
        return ()
    pairs, ok = [], True
    for key, item in env.items():
        if not isinstance(item, dict) or not ENV_NAME_RE.fullmatch(key):
            continue
        name = read_secret_ref(r, item, (*path, "env", key))
        if name is None:
            ok = False
        else:
            pairs.append((key, name))
    return tuple(pairs) if ok else None


def read_secret_mounts(r: Reader, role: dict[str, Any], path: Path) -> tuple[tuple[str, str], ...] | None:
    """`secretMounts: [{secret: kaggle, mountPath: /etc/kaggle}]`: (secret name, directory). The directory holds
    one file named after the secret, its value."""
    value = role.get("secretMounts")
    if value is None:
        return ()
    list_path = (*path, "secretMounts")
    if not isinstance(value, list):
        r.error(list_path, _("%(name)s must be a list such as [{secret: kaggle, mountPath: /etc/kaggle}]") % {
            "name": r.namer(list_path)})
        return None
    if len(value) > MAX_SECRET_MOUNTS:
        r.error(list_path, _("%(name)s has %(count)s entries; at most %(most)s") % {
            "name": r.namer(list_path), "count": len(value), "most": MAX_SECRET_MOUNTS})
        return None
    mounts, seen, ok = [], set(), True
    for i, raw in enumerate(value):
        item_path = (*list_path, i)
        item = r.mapping(raw, item_path, "secret, mountPath")
        if item is None:
            ok = False
            continue
        r.check_keys(item, item_path, ("secret", "mountPath"), where=r.namer(item_path))
        name = read_secret_ref(r, {"secret": item.get("secret")}, item_path) if "secret" in item else None
        if "secret" not in item:
            r.required(item, item_path, "secret")
        mount = r.text(item, item_path, "mountPath", required=True, pattern=MOUNT_PATH_RE,
                       hint=gettext_noop("an absolute path such as /etc/kaggle"))
        if isinstance(mount, str) and MOUNT_PATH_RE.fullmatch(mount) and ".." in mount.split("/"):
            r.error((*item_path, "mountPath"), _("%(name)s must not contain '..'") % {
                "name": r.namer((*item_path, "mountPath"))})
            mount = None
        elif isinstance(mount, str) and mount.rstrip("/") in seen:
            r.error((*item_path, "mountPath"), _("%(name)s %(path)s is mounted twice") % {
                "name": r.namer((*item_path, "mountPath")), "path": mount})
            mount = None
        if name is None or mount in (None, MISSING):
            ok = False
            continue
        seen.add(mount.rstrip("/"))
        mounts.append((name, mount.rstrip("/") or "/"))
    return tuple(mounts) if ok else None


def read_replicas(r: Reader, role: dict[str, Any], path: Path) -> tuple[int, int] | None:
    value = role.get("replicas")
    field_path = (*path, "replicas")
    if value is None:
        return (1, 1)
    if is_number(value):  # `replicas: 3` = exactly 3
        count = r.integer(role, path, "replicas", lo=1, hi=MAX_REPLICAS, default=1)
        return None if count is None else (count, count)
    replicas = r.mapping(value, field_path, _("min and max, e.g. {min: 1, max: 4}"))
    if replicas is None:
        return None
    r.check_keys(replicas, field_path, REPLICA_KEYS, where=r.namer(field_path))
    low = r.integer(replicas, field_path, "min", lo=0, hi=MAX_REPLICAS, default=MISSING)
    high = r.integer(replicas, field_path, "max", lo=1, hi=MAX_REPLICAS, default=MISSING)
    if low is None or high is None:
        return None
    if low is MISSING:
        low = 1 if high is MISSING else min(1, high)
    if high is MISSING:
        high = max(low, 1)
    if high < low:
        min_name, max_name = r.namer((*field_path, "min")), r.namer((*field_path, "max"))
        r.error((*field_path, "max"), _("%(max_name)s (%(high)s) is less than %(min_name)s (%(low)s)") % {
            "max_name": max_name, "high": high, "min_name": min_name, "low": low})
        return None
    return (low, high)


def read_resources(r: Reader, role: dict[str, Any], path: Path, vendor: str | None) -> dict[str, Any] | None:
    """The sharing mode and the per-replica amounts, as RoleSpec keyword arguments."""
    raw = role.get("resources")
    res_path = (*path, "resources")
    res = {} if raw is None else r.mapping(raw, res_path, "gpu, gpuMemory, cpu, memory, mig")
    if res is None:
        return None
    r.check_keys(res, res_path, RESOURCE_KEYS, where=r.namer(res_path))
    gpu_path, mem_path, mig_path = (*res_path, "gpu"), (*res_path, "gpuMemory"), (*res_path, "mig")
    gpu_name, mem_name, mig_name = r.namer(gpu_path), r.namer(mem_path), r.namer(mig_path)

    problems_before = len(r.issues)
    gpu = None
    if res.get("gpu") is not None:
        try:
            gpu = parse_gpu_amount(res["gpu"])
        except ValueError as exc:
            r.error(gpu_path, f"{gpu_name} {show(res['gpu'])} {exc}")
    gpu_mem = r.quantity(res, res_path, "gpuMemory", parse_memory, None)
    mig = r.text(
        res, res_path, "mig", pattern=MIG_PROFILE_RE, hint=gettext_noop("a MIG profile such as 3g.40gb or 1g.10gb")
    )
    cpu = r.quantity(res, res_path, "cpu", parse_cpu, DEFAULT_CPU_MILLI)
    mem = r.quantity(res, res_path, "memory", parse_memory, DEFAULT_MEM_MIB)
    sharing = r.choice(role, path, "sharing", SHARING_MODES, default=None)
    if sharing is None:
        if role.get("sharing") is not None or (gpu is None and res.get("gpu") is not None):
            return None  # an invalid sharing or gpu value, already reported; the mode is unknown
        sharing = (
            "mig"
            if res.get("mig") is not None
            else ("fraction" if gpu is not None and 0 < gpu < 1 else "exclusive")
        )

    sharing_name = r.namer((*path, "sharing"))
    out: dict[str, Any] = {"sharing": sharing, "cpu_milli": cpu, "mem_mib": mem}
    if sharing != "mig" and res.get("mig") is not None:
        r.error(mig_path, _("%(mig)s needs %(sharing)s mig, not %(mode)s") % {
            "mig": mig_name, "sharing": sharing_name, "mode": sharing})
    if sharing != "fraction" and res.get("gpuMemory") is not None:
        why = {
            "exclusive": _("whole GPUs come with all their memory"),
            "mig": _("the MIG profile fixes the memory"),
            "timeslice": _("time-slicing has no memory isolation"),
        }[sharing]
        r.error(mem_path, _("%(memory)s applies only to %(sharing)s fraction (%(why)s)") % {
            "memory": mem_name, "sharing": sharing_name, "why": why})

    if sharing == "exclusive":
        count = Decimal(1) if gpu is None else gpu
        if count != count.to_integral_value():
            r.error(gpu_path, _("%(gpu)s (%(value)s) must be a whole number of GPUs with %(sharing)s exclusive; "
                                "use sharing: fraction for part of a GPU") % {
                "gpu": gpu_name, "value": gpu, "sharing": sharing_name})
        elif count > MAX_GPUS_PER_REPLICA:
            r.error(gpu_path, _("%(gpu)s (%(value)s) is more than %(most)s GPUs per replica") % {
                "gpu": gpu_name, "value": gpu, "most": MAX_GPUS_PER_REPLICA})
        else:
            out.update(num_gpus=int(count), gpu_milli=MILLI_PER_GPU if count else 0)
    elif sharing == "fraction":
        if gpu is None:
            r.error(gpu_path, _("%(gpu)s is required with %(sharing)s fraction (e.g. 0.5)") % {
                "gpu": gpu_name, "sharing": sharing_name})
        elif not 0 < gpu < 1:
            r.error(gpu_path, _("%(gpu)s (%(value)s) must be between 0.01 and 0.99 with %(sharing)s fraction; "
                                "use sharing: exclusive for whole GPUs") % {
                "gpu": gpu_name, "value": gpu, "sharing": sharing_name})
        elif (gpu * 100) != (gpu * 100).to_integral_value():
            r.error(gpu_path, _("%(gpu)s (%(value)s) must be in steps of 0.01") % {"gpu": gpu_name, "value": gpu})
        else:
            out.update(num_gpus=1, gpu_milli=int(gpu * MILLI_PER_GPU), gpu_mem_mib=gpu_mem)
    elif sharing == "mig":
        if res.get("mig") is None:
            r.error(mig_path, _("%(mig)s is required with %(sharing)s mig (e.g. 3g.40gb)") % {
                "mig": mig_name, "sharing": sharing_name})
        if gpu is not None and gpu != 1:
            r.error(gpu_path, _("%(gpu)s (%(value)s) must be 1 or left out with %(sharing)s mig "
                                "(one MIG instance per replica)") % {
                "gpu": gpu_name, "value": gpu, "sharing": sharing_name})
        if vendor == "amd":
            r.error(mig_path, _("%(mig)s: MIG is an NVIDIA feature; vendor amd cannot use it") % {"mig": mig_name})
        if mig is not None:
            out.update(
                num_gpus=1, gpu_milli=mig_compute_milli(mig), gpu_mem_mib=mig_memory_mib(mig), mig_profile=mig
            )
    else:  # timeslice
        if gpu is not None and gpu != 1:
            r.error(gpu_path, _("%(gpu)s (%(value)s) must be 1 or left out with %(sharing)s timeslice "
                                "(one time-sliced GPU per replica)") % {
                "gpu": gpu_name, "value": gpu, "sharing": sharing_name})
        out.update(num_gpus=1, gpu_milli=MILLI_PER_GPU)
    return out if len(r.issues) == problems_before else None


# -- the seed's task form ------------------------------------------------------------------------


def read_seed(r: Reader) -> ReadResult:
    doc: dict[str, Any] = r.doc.value
    r.check_keys(doc, (), SEED_KEYS, where=_("the task"))
    name = r.text(doc, (), "TaskName", required=True, pattern=DNS_LABEL, hint=DNS_HINT)
    priority = r.integer(doc, (), "Priority", lo=0, hi=100, default=0)
    job_type = r.choice(doc, (), "TaskType", SEED_TASK_TYPES, default=DEFAULT_LAUNCH_TYPE, fold_case=True)
    launch_type = find_launch_type(job_type)  # None: the TaskType was wrong (an issue said)
    low = r.integer(doc, (), "MinReplicas", lo=1, hi=MAX_REPLICAS, default=1)
    high = r.integer(doc, (), "MaxReplicas", lo=1, hi=MAX_REPLICAS, default=low or 1)
    if low is not None and high is not None and high < low:
        r.error(("MaxReplicas",), _("MaxReplicas (%(high)s) is less than MinReplicas (%(low)s)") % {
            "high": high, "low": low})
    amd = r.boolean(doc, (), "AMDSupport", default=False)
    reduce_cost = r.boolean(doc, (), "ReduceCost", default=False)
    images = {
        k: r.text(doc, (), k, pattern=IMAGE_RE, hint=IMAGE_HINT)
        for k in ("TaskImage", "MasterImage", "WorkerImage")
    }
    master_max = r.integer(doc, (), "MasterMaxReplicas", lo=1, hi=MAX_REPLICAS, default=MAX_REPLICAS)
    worker_max = r.integer(doc, (), "WorkerMaxReplicas", lo=0, hi=MAX_REPLICAS, default=MAX_REPLICAS)
    vendor = "any" if amd else "nvidia"
    sources: list[dict[str, Path]] = []
    roles: list[RoleSpec] = []

    if launch_type and not launch_type.distributed:
        for key in ("MasterImage", "WorkerImage", "MasterMaxReplicas", "WorkerMaxReplicas"):
            if key in doc:
                r.error((key,), _("%(key)s applies only to TaskType MPI or PyTorch") % {"key": key}, key=True)
        image = images["TaskImage"]
        if doc.get("TaskImage") is None:
            r.required(doc, (), "TaskImage")
        elif image is not None and low is not None and high is not None:
            roles.append(
                RoleSpec(name="main", image=image, min_replicas=low, max_replicas=high, vendor=vendor)
            )
            sources.append({"image": ("TaskImage",), "vendor": ("AMDSupport",)})
    elif launch_type:
        # One master replica; the rest are workers, capped by WorkerMaxReplicas.
        for key in ("MasterImage", "WorkerImage"):
            if doc.get(key) is None and doc.get("TaskImage") is None:
                r.error((key,), _("%(key)s (or TaskImage for both roles) is required for TaskType %(type)s") % {
                    "key": key, "type": doc["TaskType"]})
        master_image = images["MasterImage"] or images["TaskImage"]
        worker_image = images["WorkerImage"] or images["TaskImage"]
        if master_image and worker_image and None not in (low, high, master_max, worker_max):
            workers_min, workers_max = low - 1, min(high - 1, worker_max)
            if workers_min > worker_max:
                r.error(("WorkerMaxReplicas",), _("WorkerMaxReplicas (%(most)s) is less than the %(workers)s "
                                                  "workers that MinReplicas (%(low)s) needs besides the master") % {
                    "most": worker_max, "workers": workers_min, "low": low})
            roles.append(RoleSpec(name=MASTER, image=master_image, vendor=vendor))
            sources.append(
                {
                    "image": ("MasterImage" if images["MasterImage"] else "TaskImage",),
                    "vendor": ("AMDSupport",),
                }
            )
            if workers_max > 0:
                roles.append(
                    RoleSpec(
                        name=WORKER,
                        image=worker_image,
                        min_replicas=workers_min,
                        max_replicas=workers_max,
                        vendor=vendor,
                    )
                )
                sources.append(
                    {
                        "image": ("WorkerImage" if images["WorkerImage"] else "TaskImage",),
                        "vendor": ("AMDSupport",),
                    }
                )

    def locate(problem: ClusterProblem) -> tuple[Path, ...]:
        if problem.role is None:
            return ((),)
        return (sources[problem.role].get(problem.attr, ("TaskType",)),)

    if r.issues or None in (name, priority, job_type, amd, reduce_cost) or not roles:
        return ReadResult(None, locate)
    spec = JobSpec(
        name=name,
        type=job_type,
        roles=tuple(roles),
        priority=priority,
        preemptible=bool(reduce_cost),
        reduce_cost=bool(reduce_cost),
    )
    return ReadResult(spec, locate)
