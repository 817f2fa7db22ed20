"""Topology domains: the nodes that share their label values down to a level a pool declares.

A pool lists its levels as node label keys, outermost first (`Pool.topology`, e.g. a block, then a rack
label); below them every pool has the node itself (`NODE_LEVEL`). The domain of a node at level i is the
tuple of its values for the keys 0..i, so rack "r1" of block "b1" is not rack "r1" of block "b2"; a node
without one of those labels is in no domain of that level and below. Pure numpy, no session.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .model import NODE_LEVEL, Node, Pool, level_name


@dataclass(frozen=True)
class Domains:
    """Every row's domain at each level: `ids[i]` (int64 [N], -1: not labelled) and `names[i]` (a domain
    id's name, its label values joined by "/"), for the levels of `keys` and, last, the node level."""

    keys: tuple[str, ...]
    ids: tuple[np.ndarray, ...]
    names: tuple[tuple[str, ...], ...]

    @property
    def node_level(self) -> int:
        return len(self.keys)


def resolve_level(pools: Iterable[Pool], level: str) -> tuple[tuple[str, ...], int] | None:
    """The levels (label keys) of the first of `pools` that has `level`, and its index there; None when
    none has it. A level is named by its key or the key's last part (`level_name`); `NODE_LEVEL` is the
    one below the declared ones."""
    for pool in pools:
        if level == NODE_LEVEL:
            return pool.topology, len(pool.topology)
        for index, key in enumerate(pool.topology):
            if level == key or level == level_name(key):
                return pool.topology, index
    return None


def level_names(pools: Iterable[Pool]) -> set[str]:
    """Every level name a job may ask of these pools (`NODE_LEVEL` always)."""
    names = {NODE_LEVEL}
    for pool in pools:
        for key in pool.topology:
            names.update((key, level_name(key)))
    return names


def build_domains(nodes: Sequence[Node], keys: tuple[str, ...]) -> Domains:
    """The domains of `nodes` (one per array row) for the levels `keys`, the node level last."""
    labels = [dict(node.labels) for node in nodes]
    ids: list[np.ndarray] = []
    names: list[tuple[str, ...]] = []
    for depth in range(1, len(keys) + 1):
        index: dict[tuple[str, ...], int] = {}
        column = np.full(len(nodes), -1, dtype=np.int64)
        wanted = keys[:depth]
        for row, own in enumerate(labels):
            if all(k in own for k in wanted):
                value = tuple(own[k] for k in wanted)
                column[row] = index.setdefault(value, len(index))
        ids.append(column)
        names.append(tuple("/".join(value) for value in index))
    ids.append(np.arange(len(nodes), dtype=np.int64))
    names.append(tuple(node.name for node in nodes))
    return Domains(keys, tuple(ids), tuple(names))


def domain_room(ids: np.ndarray, room: np.ndarray, count: int, inside: np.ndarray | None = None) -> np.ndarray:
    """Sum of `room` per domain id (float64 [count]) over the rows in a domain (and `inside`)."""
    valid = ids >= 0
    if inside is not None:
        valid &= inside
    return np.bincount(ids[valid], weights=room[valid], minlength=count)
