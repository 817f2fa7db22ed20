"""Queue-tree validation (pure): what an edit must keep true, with errors that name the field.

Pure (no Django): Queue.clean() runs it for the admin and the console alike. Rules: amounts are
not negative; a limit is at least the deserved quota; the parent exists and is not the queue itself or one of its descendants; a queue holding jobs cannot become a parent (jobs
go to leaf queues, and so does a queue workspaces submit to); the deserved quotas of a queue's
children fit in its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class QueueRow:
    name: str
    parent: str | None
    deserved_gpus: Decimal
    over_quota_weight: Decimal = Decimal(1)
    limit_gpus: Decimal | None = None
    has_jobs: bool = False  # holds unfinished jobs, or workspaces may submit to it


def _gpus(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def validate_queue(rows: Sequence[QueueRow], name: str) -> dict[str, list[str]]:
    """Errors by field for queue `name` in the tree `rows` (which already holds the edit)."""
    by_name = {r.name: r for r in rows}
    if len(by_name) != len(rows):
        raise ValueError("queue rows: duplicate names")
    q = by_name[name]
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if q.deserved_gpus < 0:
        bad("deserved_gpus", "must be 0 or more GPUs")
    if q.over_quota_weight < 0:
        bad("over_quota_weight", "must be 0 or more")
    if q.limit_gpus is not None:
        if q.limit_gpus < 0:
            bad("limit_gpus", "must be 0 or more GPUs (leave it empty for no limit)")
        elif q.limit_gpus < q.deserved_gpus:
            bad("limit_gpus", f"the limit ({_gpus(q.limit_gpus)} GPUs) is below the deserved quota "
                              f"({_gpus(q.deserved_gpus)} GPUs)")
    if q.parent is not None:
        parent = by_name.get(q.parent)
        if parent is None:
            bad("parent", f"queue '{q.parent}' does not exist")
        else:
            seen, cur = set(), parent.name
            while cur is not None and cur not in seen:
                if cur == q.name:
                    bad("parent", f"'{q.parent}' is '{q.name}' itself or one of its sub-queues: the tree would loop")
                    break
                seen.add(cur)
                cur = by_name[cur].parent if cur in by_name else None
            if parent.has_jobs:
                bad("parent", f"queue '{parent.name}' holds jobs or workspaces submit to it; jobs go to leaf "
                              "queues, so it cannot have sub-queues")
            siblings = [r for r in rows if r.parent == parent.name]
            total = sum((r.deserved_gpus for r in siblings), Decimal(0))
            if total > parent.deserved_gpus:
                bad("deserved_gpus", f"the sub-queues of '{parent.name}' would deserve {_gpus(total)} GPUs in all, "
                                     f"more than its {_gpus(parent.deserved_gpus)}")
    children = [r for r in rows if r.parent == q.name]
    if children:
        total = sum((r.deserved_gpus for r in children), Decimal(0))
        if total > q.deserved_gpus:
            names = ", ".join(sorted(r.name for r in children))
            bad("deserved_gpus", f"its sub-queues ({names}) deserve {_gpus(total)} GPUs in all, more than "
                                 f"{_gpus(q.deserved_gpus)}")
        if q.has_jobs:
            bad("parent", f"'{q.name}' has sub-queues and holds jobs or workspaces submit to it; jobs go to leaf "
                          "queues")
    return errors
