"""Outside scheduling/kinds (and migrations), no Python decides by a workload kind: it asks the kind object
(scheduling.kinds.kind_of) for the behaviour. This reads the syntax tree of every module of the platform's
packages, so a comparison is found however it is written or wrapped; test_no_kind_comparisons reads the
templates and scripts, which have no Python tree.

What counts as deciding by a kind: comparing with a kind's name or a launch shape (`==`, `in`, a tuple
of names), comparing a spec's part named after a kind (`spec.notebook is None`), a query keyword given
a kind's name (`kind="notebook"`), a `case` of a kind's name, and a table keyed by kinds' names or
mapping onto them. A training job's launch type (single, pytorch, mpi) is read for the same: its object is
scheduling.kinds.launch_type(name). And a mount's kind (a volume or a dataset version) is compared only in
scheduling/storage.py, whose Mount answers for it (`of_dataset`, `writable`)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from scheduling import kinds
from scheduling.backends.base import SHAPES
from scheduling.storage import DATASET, VOLUME

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("portal", "billing", "scheduling", "gpuctl", "nodeagent")
SKIPPED = ("scheduling/kinds/", "/migrations/")
SHAPE_NAMES = ("BATCH", "JUPYTER", "MODEL_SERVER")  # scheduling.backends.base's names for SHAPES
MOUNT_HOME = "scheduling/storage.py"  # Mount, with the mount kinds

# (module, the expression as ast.unparse writes it) -> why it may decide by a kind.
ALLOWED = {
    # A backend launches a replica's process by its shape, the vocabulary in which a kind names its process
    # (Kind.launch_shape); what each process needs (a pod's port and home claim, a local server) is the
    # backend's own, and a new kind reuses a shape without any backend changing.
    ("scheduling/backends/kubernetes/backend.py", "replica.shape == JUPYTER"): "a backend launches by shape",
    ("scheduling/backends/kubernetes/backend.py", "replica.shape == MODEL_SERVER"): "a backend launches by shape",
    ("scheduling/backends/kubernetes/manifests.py", "replica.shape == JUPYTER"): "a backend launches by shape",
    ("scheduling/backends/kubernetes/manifests.py", "replica.shape == MODEL_SERVER"): "a backend launches by shape",
    ("scheduling/backends/simulated/backend.py", "replica.shape == JUPYTER"): "a backend launches by shape",
    ("scheduling/backends/simulated/backend.py", "replica.shape == MODEL_SERVER"): "a backend launches by shape",
    ("scheduling/backends/simulated/backend.py", "r.shape == BATCH"): "a backend launches by shape",
    ("scheduling/backends/simulated/backend.py", "r.shape != BATCH"): "a backend launches by shape",
    # The command-line client imports nothing of the platform (an import contract), so it keeps its own
    # table of the kinds it has a command for, keyed by the name the API gives.
    ("gpuctl/kinds.py", "{'notebook': 'notebook', 'inference': 'serve'}"): "the client imports no platform code",
    # The memory estimate is for a task, training or inference, whatever kind of job asks for it.
    ("scheduling/serving/memory.py", "('training', 'inference')"): "the memory estimate's tasks, not kinds",
    # The image form writes one launch type, the default: a spec of another is shown as what the form cannot hold.
    ("scheduling/spec/__init__.py", "spec.type != workload_kinds.DEFAULT_LAUNCH_TYPE"): "the form writes the default",
}


@functools.lru_cache(maxsize=1)
def _tree(source: str) -> ast.Module:
    """A module's syntax tree, parsed once for the scans that read one module after another (only the last
    is kept: the whole platform's trees would stay in the worker for the rest of the run)."""
    return ast.parse(source)


def _strings(node: ast.AST, identifiers: bool = True) -> set[str]:
    """The strings and (with `identifiers`) constant names a comparison's side holds (itself, or a tuple,
    list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name) and identifiers:
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(e, identifiers) for e in node.elts)) if node.elts else set()
    return set()


def branches(source: str, names: tuple[str, ...], *, marks: tuple[str, ...] = (), field: str = "kind",
             identifiers: bool = True) -> list[str]:
    """The expressions in `source` that decide by one of `names` (or a constant of `marks`), ast.unparse's
    text of each. `field`: the query keyword that holds such a name; `identifiers`: whether a variable or
    constant of such a name counts (a kind's constants are its shapes; a launch type has none)."""
    wanted = {*names, *marks}
    found = []
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_strings(side, identifiers) & wanted for side in sides) or any(
                    isinstance(side, ast.Attribute) and side.attr in names for side in sides):
                found.append(node)
        elif isinstance(node, ast.Call):
            if any(k.arg and k.arg.split("__")[-2 if k.arg.endswith("__in") else -1] == field
                   and _strings(k.value) & set(names) for k in node.keywords):
                found.append(node)
        elif isinstance(node, ast.MatchValue) and _strings(node.value, identifiers) & wanted:
            found.append(node)
        elif isinstance(node, ast.Dict) and node.keys and all(
                isinstance(k, ast.Constant) and k.value in names for k in node.keys):
            found.append(node)  # a table keyed by kinds (one with other keys is a record, not a table)
        elif isinstance(node, ast.Dict) and len(node.values) > 1 and all(
                isinstance(v, ast.Constant) and v.value in names for v in node.values):
            found.append(node)  # a table onto kinds: other words for them (one entry is a record)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
                isinstance(e, ast.Constant) and e.value in names for e in node.elts):
            found.append(node)  # a list of kinds, which decides by kind wherever its name is used
    return [ast.unparse(node) for node in found]


def kind_branches(source: str, names: tuple[str, ...]) -> list[str]:
    """The expressions in `source` that decide by a workload kind or a launch shape."""
    return branches(source, names, marks=(*SHAPES, *SHAPE_NAMES))


# The constants that stand for a launch type or a mount kind where they are defined: comparing with one is
# comparing with the name (a variable such as `single` is not one).
LAUNCH_TYPE_CONSTANTS = frozenset({"DEFAULT_LAUNCH_TYPE", "SINGLE", "PYTORCH", "MPI"})
MOUNT_KIND_CONSTANTS = frozenset({"VOLUME", "DATASET"})


def _constants(node: ast.AST) -> set[str]:
    """The constant names a comparison's side holds: a name, a module's attribute, or a tuple of them."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_constants, node.elts)) if node.elts else set()
    return set()


def _compared_with(source: str, constants: frozenset[str], *, kind_attribute: bool = False) -> list[str]:
    """The comparisons in `source` with one of `constants` (with `kind_attribute`: only of something's `kind`)."""
    return [ast.unparse(node) for node in ast.walk(_tree(source)) if isinstance(node, ast.Compare)
            and (not kind_attribute or any(isinstance(side, ast.Attribute) and side.attr == "kind"
                                           for side in (node.left, *node.comparators)))
            and any(_constants(side) & constants for side in (node.left, *node.comparators))]


def launch_type_branches(source: str, names: tuple[str, ...]) -> list[str]:
    """The expressions in `source` that decide by a training job's launch type (`Job.job_type`)."""
    return [*branches(source, names, field="job_type", identifiers=False),
            *_compared_with(source, LAUNCH_TYPE_CONSTANTS)]


def mount_kind_branches(source: str, names: tuple[str, ...] = (VOLUME, DATASET)) -> list[str]:
    """The comparisons in `source` of something's `kind` with a mount kind (a volume, a dataset version)."""
    by_name = [ast.unparse(node) for node in ast.walk(_tree(source)) if isinstance(node, ast.Compare)
               and any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in (node.left, *node.comparators))
               and any(_strings(side, False) & set(names) for side in (node.left, *node.comparators))]
    return [*by_name, *_compared_with(source, MOUNT_KIND_CONSTANTS, kind_attribute=True)]


KIND_NAMES = ("training", "notebook", "inference")
LAUNCH_TYPE_NAMES = ("single", "pytorch", "mpi")

# (the scan, a module's source, whether the scan finds a branch in it)
SCAN_CASES = [
    *[(kind_branches, source, True) for source in (
        'x = kind not in ("notebook", "x")\n',
        'x = "training" != spec.kind\n',
        "x = replica.shape == JUPYTER\n",
        'x = replica.shape != "batch"\n',
        "x = spec.inference is not None\n",
        'Job.objects.filter(kind="notebook")\n',
        'Job.objects.filter(job__kind__in=["notebook", "inference"])\n',
        'match kind:\n    case "inference":\n        pass\n',
        'COMMANDS = {"notebook": "notebook"}\n',
        'SSH_KINDS = ("training", "notebook")\n',
        # a kind's name is found whatever it is compared with (the memory estimate's task names its own constants)
        'x = task == "training"\n',
    )],
    # not a kind: a slice's kind, a registry look-up, a query by the kinds' own facts, a record with such a key
    *[(kind_branches, source, False) for source in (
        'x = slice_kind == "fraction"\n',
        'k = kinds.get("notebook")\n',
        "Job.objects.filter(kind__in=kinds.names_where(autoscaled=True))\n",
        'Job.objects.filter(kind=parsed.kind, name="notebook")\n',
        'attrs = {"notebook": notebook, "token": token}\n',
        'attrs = {"kind": "notebook"}\n',
    )],
    # what the spec readers, the Kubernetes backend and the demo compared before the types had objects, and
    # the types' constants, which stand for their names
    *[(launch_type_branches, source, True) for source in (
        'x = job_type in ("pytorch", "mpi") and role.name not in ("master", "worker")\n',
        'x = job_type == "single" and len(raw_roles) > 1\n',
        'DISTRIBUTED = ("pytorch", "mpi")\n',
        'SEED_TASK_TYPES = {"MPI": "mpi", "PyTorch": "pytorch", "other": "single"}\n',
        'x = "{min: 1, max: 2}" if job_type == "pytorch" else "{min: 1, max: 1}"\n',
        'Job.objects.filter(job_type__in=["pytorch", "mpi"])\n',
        "x = spec.type != kinds.DEFAULT_LAUNCH_TYPE\n",
        "x = launch is MPI\n",
        "x = job_type in (SINGLE, PYTORCH)\n",
    )],
    # not a branch: a look-up of the type's object, a question to it, a table with other keys, a record, a variable
    *[(launch_type_branches, source, False) for source in (
        't = launch_type("mpi")\n',
        "x = launch_type(replica.job_type).distributed\n",
        'LABELS = {"single": "1 GPU", "clean": "every field"}\n',
        'doc = {"name": name, "type": "single"}\n',
        'Job.objects.filter(job_type=spec.type, name="mpi")\n',
        "x = single is not None\n",
    )],
    # what the backends compared before Mount answered
    *[(mount_kind_branches, source, True) for source in (
        'x = mount.kind == "volume" and not mount.read_only\n',
        'x = m.kind in ("volume", "dataset")\n',
        "x = mount.kind == DATASET\n",
        "x = mount.kind != storage.VOLUME\n",
    )],
    # not a branch: a question to the mount, another thing called volume, a mount made of a kind
    *[(mount_kind_branches, source, False) for source in (
        "x = mount.of_dataset\n",
        "x = checkpoint.volume is None\n",
        'm = Mount("volume", "lab", "data", 0, "/data", False)\n',
        'm = Mount(VOLUME, "lab", "data", 0, "/data", False)\n',
        "x = mount.path == VOLUME_ROOT\n",
    )],
]


def _scan(scan, source: str) -> list[str]:
    if scan is kind_branches:
        return kind_branches(source, KIND_NAMES)
    if scan is launch_type_branches:
        return launch_type_branches(source, LAUNCH_TYPE_NAMES)
    return scan(source)


@pytest.mark.parametrize(("scan", "source", "branch"), SCAN_CASES)
def test_the_scan_finds_what_it_looks_for_and_nothing_else(scan, source, branch):
    assert bool(_scan(scan, source)) is branch


def test_the_scan_names_the_expression_it_found():
    assert kind_branches('if job.kind == "notebook":\n    pass\n', KIND_NAMES) == ["job.kind == 'notebook'"]
    assert launch_type_branches('if replica.job_type == "mpi":\n    pass\n', LAUNCH_TYPE_NAMES) == [
        "replica.job_type == 'mpi'"]
    assert mount_kind_branches('if mount.kind == "dataset":\n    pass\n') == ["mount.kind == 'dataset'"]


@functools.cache
def _found() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if any(skip in f"/{where}" for skip in SKIPPED):
                continue
            source = path.read_text()
            mounts = mount_kind_branches(source) if where != MOUNT_HOME else []
            for text in [*kind_branches(source, kinds.names()),
                         *launch_type_branches(source, kinds.launch_type_names()), *mounts]:
                found[(where, text)] = found.get((where, text), 0) + 1
    return found


def test_no_module_outside_the_kinds_decides_by_a_kind():
    assert sorted(key for key in _found() if key not in ALLOWED) == []


def test_each_allowed_exception_is_still_there():
    """An exception whose code has gone (or moved into a kind) leaves the list, so the list stays short."""
    found = _found()
    assert sorted(key for key in ALLOWED if key not in found) == []


# -- a kind's facts read outside the kinds ----------------------------------------------------------------
# A kind's facts (its flags and named values) are read only inside scheduling/kinds. Outside, a caller asks the
# kind a question in its own terms (`kind.home_volume(job)`, `kind.end_idle(job, reason, stop=..., cancel=...)`,
# `kind.check_stop_start(job)`), or asks the registry which kinds answer one (`kind__in=kinds.autoscaled()`), so
# that neither the caller nor its message names a fact or the kinds that have it. The one exception is listed
# here with why.
FACTS = frozenset({*(name for name, value in vars(kinds.base.Kind).items() if isinstance(value, bool)),
                   *kinds.base.KNOWN_VALUES, "name_taken"})
FACT_READS = {
    # The quote API publishes how a kind's rates read (its `rates` field, a contract the submit page's script
    # reads too); the page renders the same value.
    ("portal/api/quotes.py", "quote_rates"): "the API publishes the value as `rates`",
    ("portal/submit_page.py", "quote_rates"): "the page renders the value the API publishes",
}


def _is_registry_answer(node: ast.AST) -> bool:
    """`kinds.kind_of(x)`, `kinds.get(name)` or the like: the kind object, asked for directly."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("kind_of", "get", "find") and (isinstance(func, ast.Name) or "kind" in ast.unparse(func.value))


def fact_reads(source: str) -> set[str]:
    """The facts `source` reads off a kind object it asked the registry for (directly, or through a name it
    gave the answer), or asks `names_where` by."""
    found = set()
    tree = _tree(source)
    held = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_registry_answer(node.value)
            for target in node.targets if isinstance(target, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FACTS and (
                _is_registry_answer(node.value) or (isinstance(node.value, ast.Name) and node.value.id in held)):
            found.add(node.attr)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("names_where"):
            found |= {k.arg for k in node.keywords if k.arg in FACTS}
    return found


@pytest.mark.parametrize(("source", "facts"), [
    ("if not kinds.kind_of(job).stoppable:\n    raise Conflict('x')\n", {"stoppable"}),
    ("x = workload_kinds.kind_of(spec).has_home\n", {"has_home"}),
    ("r = kinds.get(kind).quote_rates\n", {"quote_rates"}),
    ("q = Job.objects.filter(kind__in=kinds.names_where(autoscaled=True))\n", {"autoscaled"}),
    ("kind = kinds.kind_of(parsed)\nif kind.name_taken is None:\n    pass\n", {"name_taken"}),
    ("kind = kinds.kind_of(parsed)\nx = kind.name_refusal(parsed, w, f)\n", set()),
    ("kinds.kind_of(job).check_stop_start(job)\n", set()),   # a question the kind answers
    ("x = kinds.kind_of(job).noun\n", set()),                 # a word, not a fact
    ("x = settings.get('ssh').ssh\n", set()),                # not the registry
])
def test_the_fact_scan_finds_a_kind_fact_read(source, facts):
    assert fact_reads(source) == facts


@functools.cache
def _fact_reads() -> frozenset[tuple[str, str]]:
    found = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if not any(skip in f"/{where}" for skip in SKIPPED):
                found |= {(where, fact) for fact in fact_reads(path.read_text())}
    return frozenset(found)


def test_a_kind_fact_is_read_outside_the_kinds_only_where_listed():
    assert sorted(_fact_reads() - FACT_READS.keys()) == []


def test_each_listed_fact_read_is_still_there():
    assert sorted(FACT_READS.keys() - _fact_reads()) == []
