"""A service's revisions and its rollout, each evaluation on known placements (no processes): a new revision
surges one replica beside the old ones, the old ones serve until it is ready, then they are replaced; a
split keeps one replica of each revision that takes traffic."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduling.errors import DomainError
from scheduling.models import JobState
from scheduling.service_revisions import check_traffic, rollout


def placement(pk: int, index: int, revision: int | None, state: str = JobState.RUNNING):
    return SimpleNamespace(pk=pk, index=index, revision=revision, state=state)


def scale(revision: int, traffic=()):
    return SimpleNamespace(revision=revision, traffic=list(traffic))


def test_a_new_revision_surges_one_then_replaces_the_old_once_ready():
    old = [placement(1, 0, 1), placement(2, 1, 1)]
    first = rollout(scale(2), old, ready={1, 2})
    assert first.at_least == 3 and first.replaced == ()  # one more, beside the two old ones
    starting = [*old, placement(3, 2, 2, JobState.SCHEDULED)]
    assert rollout(scale(2), starting, ready={1, 2}).replaced == ()  # not ready yet: the old ones serve
    ready = [*old, placement(3, 2, 2)]
    done = rollout(scale(2), ready, ready={1, 2, 3})
    assert [r.pk for r in done.replaced] == [1, 2] and done.at_least == 3  # the new one keeps its index


def test_a_split_keeps_one_replica_of_each_revision_and_replaces_none():
    split = scale(4, [{"revision": 3, "percent": 90}, {"revision": 4, "percent": 10}])
    placed = [placement(1, 0, 3), placement(2, 1, 4)]
    assert rollout(split, placed, ready={1, 2}) == rollout(split, placed, ready={1, 2})
    assert (
        rollout(split, placed, ready={1, 2}).at_least == 2
        and rollout(split, placed, ready={1, 2}).replaced == ()
    )
    assert rollout(split, [placement(1, 0, 3)], ready={1}).at_least == 2  # 4 has none yet: a surge


def test_placements_from_before_revisions_are_revision_one():
    assert rollout(scale(1), [placement(1, 0, None)], ready={1}).replaced == ()


@pytest.mark.parametrize(
    ("traffic", "why"),
    [
        ([{"revision": 1, "percent": 60}, {"revision": 2, "percent": 30}], "add up to 90"),
        ([{"revision": 7, "percent": 100}], "no revision 7"),
        ([{"revision": 1, "percent": 50}, {"revision": 1, "percent": 50}], "named twice"),
        ([{"revision": 1, "percent": 101}], "whole percent"),
        ([], "list of 1 to"),
        ("all", "list of 1 to"),
    ],
)
def test_a_bad_split_is_refused_with_why(traffic, why):
    with pytest.raises(DomainError, match=why):
        check_traffic(traffic, {1, 2})
