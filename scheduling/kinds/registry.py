"""The registry of workload kinds: a kind's name (`Job.kind`, a spec's `kind`) -> its object.

The built-in kinds are loaded by module name on first use, as Django loads its apps: the registry
imports none of them, so `scheduling.models` (whose `Job.kind` choices come from here) and the
spec readers may use it while the kinds themselves use both.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Protocol


class Kind(Protocol):
    """What the registry reads of a kind; the whole interface is scheduling.kinds.base.Kind, which the
    registry does not import (the kinds import the spec readers, and those read the default from here)."""

    name: str

DEFAULT = "training"  # a spec without `kind`
BUILTIN = ("scheduling.kinds.training", "scheduling.kinds.notebook", "scheduling.kinds.inference")

_kinds: dict[str, Kind] = {}
_loaded = False


def _load() -> dict[str, Kind]:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN:
            register(import_module(module).KIND)
    return _kinds


def register(kind: Kind) -> Kind:
    """Add a kind (a test's throwaway kind, or a built-in one as it loads)."""
    _load()
    if kind.name in _kinds and _kinds[kind.name] is not kind:
        raise ValueError(f"kind {kind.name!r} is already registered")
    _kinds[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _load()
    _kinds.pop(name, None)


def get(name: str | None) -> Kind:
    """The kind of that name (None or "": the default); KeyError for a name no kind has."""
    return _load()[name or DEFAULT]


def find(name: Any) -> Kind | None:
    """The kind of that name, or None for anything else (a value a user typed)."""
    return _load().get(name) if isinstance(name, str) else None


def all() -> tuple[Kind, ...]:  # noqa: A001 - the registry's own word, as kinds.all()
    return tuple(_load().values())


def names() -> tuple[str, ...]:
    return tuple(_load())


def choices() -> list[tuple[str, Any]]:
    """`Job.kind`'s choices (Django reads this callable whenever it needs them)."""
    return [(kind.name, kind.label) for kind in _load().values()]


def kind_of(job: Any) -> Kind:
    """The kind of a Job, a JobSpec or a ReplicaLaunch (anything with a `kind` name)."""
    return get(job.kind)


def names_where(**facts: Any) -> list[str]:
    """The names of the kinds whose attributes have those values, for a query (`kind__in=`)."""
    return [k.name for k in _load().values() if all_match(k, facts)]


def all_match(kind: Kind, facts: dict[str, Any]) -> bool:
    return not [name for name, value in facts.items() if getattr(kind, name) != value]


# The questions a query asks of the kinds, so that no caller names a kind's fact (`kind__in=kinds.autoscaled()`).
def listed_on(page: str) -> list[str]:
    """The kinds a portal page (jobs, notebooks, services) lists."""
    return names_where(listed_on=page)


def autoscaled() -> list[str]:
    """The services: the kinds whose replicas the autoscaler sets, woken by a request, metered in tokens."""
    return names_where(autoscaled=True)


def idled_by_activity() -> list[str]:
    """The kinds whose idling their own server's activity judges (a notebook's kernels), not their GPUs."""
    return names_where(idle_by_activity=True)


def personal() -> list[str]:
    """The kinds that are their submitter's own, stopped when the account is deactivated."""
    return names_where(personal=True)
