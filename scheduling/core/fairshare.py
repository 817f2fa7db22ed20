"""Fair share over the queue tree by water-filling.

At each level the parent's share is split among its children: first each child gets its deserved
quota (capped by what it asks for), then what is left is poured by over-quota weight, each child
capped by its limit and its demand, until the remainder is gone or every child is full. Queue
priority orders the pouring: the highest-priority children are filled first, the next level gets
what they leave (as KAI-Scheduler divides over-quota resources).

The over-quota part goes in whole GPUs, as KAI-Scheduler gives it: in rounds, a child takes what it
still asks for when its weight's part covers it, else that part rounded down to whole GPUs; once a
round gives every child its part, what the rounding left goes a GPU at a time to the children whose
last part lost the biggest fraction (each once, never over what it asks for), a priority level's
before the next level is poured. Where the rounding would have to pick among children it kept equal
fractions from (KAI orders them by creation time, which queues here do not have), the siblings'
division is the exact one instead; so is it wherever the whole-GPU division comes to the same
shares. Siblings of equal weights are therefore always divided exactly.

Time-based fair share: given each queue's past usage (decayed GPU-time as a fraction of what the
cluster could have given over the window), the over-quota weights of siblings are shifted away
from those that used more than their weight's share: w' = max(0, w + k (w - u)) with w and u
normalised over the siblings. Deserved quotas are untouched; k = 0 turns it off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .model import Queue
from .units import MILLI_PER_GPU

EPS = 1e-6


def queue_children(queues: Sequence[Queue]) -> dict[str | None, list[Queue]]:
    """Children by parent name (None = the roots), in name order; checks the tree is sound."""
    names = {q.name for q in queues}
    if len(names) != len(queues):
        raise ValueError("queues: duplicate queue names")
    children: dict[str | None, list[Queue]] = {}
    for q in queues:
        if q.parent is not None and q.parent not in names:
            raise ValueError(f"queue {q.name!r}: parent {q.parent!r} does not exist")
        children.setdefault(q.parent, []).append(q)
    for kids in children.values():
        kids.sort(key=lambda q: q.name)
    # Every queue must reach a root, otherwise there is a cycle.
    parent = {q.name: q.parent for q in queues}
    for q in queues:
        seen, cur = set(), q.name
        while cur is not None:
            if cur in seen:
                raise ValueError(f"queue {q.name!r}: parent chain has a cycle")
            seen.add(cur)
            cur = parent[cur]
    return children


def subtree_demand(queues: Sequence[Queue], leaf_demand: Mapping[str, float]) -> dict[str, float]:
    """Demand of each queue = its own jobs' demand plus its descendants'."""
    parent = {q.name: q.parent for q in queues}
    total = {q.name: 0.0 for q in queues}
    for name, amount in leaf_demand.items():
        cur: str | None = name
        while cur is not None:
            total[cur] += amount
            cur = parent[cur]
    return total


def usage_weights(kids: list[Queue], usage: Mapping[str, float], k: float) -> dict[str, float]:
    """Over-quota weights of siblings, lowered for those whose past usage exceeded their weight's
    share of the siblings' usage and raised for those below it."""
    weights = {q.name: q.over_quota_weight for q in kids}
    total_weight = sum(weights.values())
    total_usage = sum(usage.get(q.name, 0.0) for q in kids)
    if k <= 0 or total_weight <= 0 or total_usage <= 0:
        return weights
    adjusted = {}
    for q in kids:
        share = weights[q.name] / total_weight
        used = usage.get(q.name, 0.0) / total_usage
        # a queue with no weight never gets any over-quota share, history or not
        adjusted[q.name] = max(0.0, share + k * (share - used)) if weights[q.name] > 0 else 0.0
    return adjusted


def _split(amount: float, kids: list[Queue], demand: Mapping[str, float],
           weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Water-fill `amount` over sibling queues: deserved first, then the rest by priority level, in
    whole GPUs unless only a tie could decide them (see the module's docstring)."""
    cap = {}
    for q in kids:
        c = demand[q.name]
        if q.limit_milli is not None:
            c = min(c, q.limit_milli)
        cap[q.name] = max(c, 0.0)
    share = {q.name: min(float(q.deserved_milli), cap[q.name]) for q in kids}
    given = sum(share.values())
    if given > amount:
        # Deserved quotas over-commit the parent: scale them down proportionally.
        scale = amount / given if given else 0.0
        return {name: s * scale for name, s in share.items()}
    # Higher-priority queues fill up to their demand before lower ones get any over-quota share.
    weights = weights if weights is not None else {q.name: q.over_quota_weight for q in kids}
    levels = [[q for q in kids if q.priority == level] for level in sorted({q.priority for q in kids}, reverse=True)]
    exact, left = dict(share), amount - given
    for level in levels:
        left = _pour(left, level, exact, cap, weights)
    whole = _whole_gpus(amount - given, levels, dict(share), cap, weights)
    if whole is None or all(abs(whole[name] - exact[name]) <= EPS for name in exact):
        return exact
    return whole


def _pour(left: float, kids: list[Queue], share: dict[str, float], cap: Mapping[str, float],
          weights: Mapping[str, float]) -> float:
    """Pour `left` over `kids` by over-quota weight, each up to its cap; returns what is left."""
    open_kids = [q for q in kids if share[q.name] < cap[q.name] and weights[q.name] > 0]
    while left > 1e-9 and open_kids:
        weight = sum(weights[q.name] for q in open_kids)
        poured = 0.0
        still_open = []
        for q in open_kids:
            offer = left * weights[q.name] / weight
            take = min(offer, cap[q.name] - share[q.name])
            share[q.name] += take
            poured += take
            if share[q.name] < cap[q.name] - 1e-9:
                still_open.append(q)
        left -= poured
        if len(still_open) == len(open_kids):
            break                       # nobody hit a cap, so everything was poured
        open_kids = still_open
    return max(left, 0.0)


def _whole_gpus(left: float, levels: list[list[Queue]], share: dict[str, float], cap: Mapping[str, float],
                weights: Mapping[str, float]) -> dict[str, float] | None:
    """`left` over the priority levels in whole GPUs (added to `share`, which it returns), or None
    where the GPUs the rounding left would go by a tie."""
    for kids in levels:
        lost: dict[str, float] = {}      # the fraction the rounding kept from each child's last part
        while left > EPS:
            open_kids = [q for q in kids if share[q.name] < cap[q.name] - EPS and weights[q.name] > 0]
            weight = sum(weights[q.name] for q in open_kids)
            if weight <= 0:
                break
            offered, again = left, False
            for q in open_kids:
                part = offered * weights[q.name] / weight
                wants = cap[q.name] - share[q.name]
                if wants <= part + EPS:
                    take = wants
                    lost.pop(q.name, None)
                    again = again or wants < part - EPS
                else:
                    take = math.floor((part + EPS) / MILLI_PER_GPU) * MILLI_PER_GPU
                    if part - take > EPS:
                        lost[q.name] = part - take
                    else:
                        lost.pop(q.name, None)
                share[q.name] += take
                left -= take
            if not again:
                break
        ranked = sorted(lost, key=lambda n: -lost[n])
        while ranked and left > EPS:
            tied = [n for n in ranked if lost[n] >= lost[ranked[0]] - EPS]
            ranked = ranked[len(tied):]
            gives = {n: min(float(MILLI_PER_GPU), cap[n] - share[n]) for n in tied}
            if len(tied) > 1 and sum(gives.values()) > left + EPS:
                return None
            for n in tied:
                take = min(gives[n], left)
                share[n] += take
                left -= take
    return share


def fair_shares(queues: Sequence[Queue], capacity_milli: float, leaf_demand: Mapping[str, float],
                leaf_usage: Mapping[str, float] | None = None, usage_k: float = 0.0) -> dict[str, float]:
    """Fair share in milli-GPU for every queue in the tree.

    `leaf_demand` is what each queue's own jobs ask for (running plus pending, elastic maxima
    included); `capacity_milli` is the cluster's GPU total. `leaf_usage` (each queue's own past
    usage) with `usage_k` > 0 makes the over-quota division time-based.
    """
    children = queue_children(queues)
    demand = subtree_demand(queues, leaf_demand)
    usage = subtree_demand(queues, leaf_usage or {}) if usage_k > 0 and leaf_usage else {}
    result: dict[str, float] = {}
    stack: list[tuple[str | None, float]] = [(None, float(capacity_milli))]
    while stack:
        parent, amount = stack.pop()
        kids = children.get(parent, [])
        if not kids:
            continue
        weights = usage_weights(kids, usage, usage_k) if usage else None
        for name, share in _split(amount, kids, demand, weights).items():
            result[name] = share
            stack.append((name, share))
    return result
