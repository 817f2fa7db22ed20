"""Queue-tree validation (pure): what an edit must keep true, with errors that name the field.

Pure (no Django): Queue.clean() runs it for the admin and the console alike, and passes `say`, which
puts each message in the reader's language (the messages are marked for makemessages below). Rules: amounts are
not negative; a limit is at least the deserved quota; the parent exists and is not the queue itself or one of its descendants; a queue holding jobs cannot become a parent (jobs
go to leaf queues, and so does a queue workspaces submit to); the deserved quotas of a queue's
children fit in its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def gettext_noop(text: str) -> str:
    """Marks a message for the catalogue (makemessages reads the name) without importing Django."""
    return text


def english(text: str, **figures) -> str:
    return text % figures if figures else text


def validate_queue(rows: Sequence[QueueRow], name: str,
                   say: Callable[..., str] = english) -> dict[str, list[str]]:
    """Errors by field for queue `name` in the tree `rows` (which already holds the edit); `say(message,
    **figures)` writes each one (English by default)."""
    by_name = {r.name: r for r in rows}
    if len(by_name) != len(rows):
        raise ValueError("queue rows: duplicate names")
    q = by_name[name]
    errors: dict[str, list[str]] = {}

    def bad(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if q.deserved_gpus < 0:
        bad("deserved_gpus", say(gettext_noop("must be 0 or more GPUs")))
    if q.over_quota_weight < 0:
        bad("over_quota_weight", say(gettext_noop("must be 0 or more")))
    if q.limit_gpus is not None:
        if q.limit_gpus < 0:
            bad("limit_gpus", say(gettext_noop("must be 0 or more GPUs (leave it empty for no limit)")))
        elif q.limit_gpus < q.deserved_gpus:
            bad("limit_gpus", say(gettext_noop("the limit (%(limit)s GPUs) is below the deserved quota "
                                               "(%(deserved)s GPUs)"),
                                  limit=_gpus(q.limit_gpus), deserved=_gpus(q.deserved_gpus)))
    if q.parent is not None:
        parent = by_name.get(q.parent)
        if parent is None:
            bad("parent", say(gettext_noop("queue '%(parent)s' does not exist"), parent=q.parent))
        else:
            seen, cur = set(), parent.name
            while cur is not None and cur not in seen:
                if cur == q.name:
                    bad("parent", say(gettext_noop("'%(parent)s' is '%(queue)s' itself or one of its sub-queues: the "
                                                   "tree would loop"), parent=q.parent, queue=q.name))
                    break
                seen.add(cur)
                cur = by_name[cur].parent if cur in by_name else None
            if parent.has_jobs:
                bad("parent", say(gettext_noop("queue '%(parent)s' holds jobs or workspaces submit to it; jobs go to "
                                               "leaf queues, so it cannot have sub-queues"), parent=parent.name))
            siblings = [r for r in rows if r.parent == parent.name]
            total = sum((r.deserved_gpus for r in siblings), Decimal(0))
            if total > parent.deserved_gpus:
                bad("deserved_gpus", say(gettext_noop("the sub-queues of '%(parent)s' would deserve %(total)s GPUs "
                                                      "in all, more than its %(deserved)s"),
                                         parent=parent.name, total=_gpus(total), deserved=_gpus(parent.deserved_gpus)))
    children = [r for r in rows if r.parent == q.name]
    if children:
        total = sum((r.deserved_gpus for r in children), Decimal(0))
        if total > q.deserved_gpus:
            names = ", ".join(sorted(r.name for r in children))
            bad("deserved_gpus", say(gettext_noop("its sub-queues (%(queues)s) deserve %(total)s GPUs in all, more "
                                                  "than %(deserved)s"),
                                     queues=names, total=_gpus(total), deserved=_gpus(q.deserved_gpus)))
        if q.has_jobs:
            bad("parent", say(gettext_noop("'%(queue)s' has sub-queues and holds jobs or workspaces submit to it; "
                                           "jobs go to leaf queues"), queue=q.name))
    return errors
