"""A worker's cycle runs with the cyclic garbage collector off and collects once after it, freezing what
survives; every WHOLE_HEAP_EVERY cycles the whole heap is collected, so garbage cycles among frozen objects
are freed too."""

import gc
import weakref

import pytest

from scheduling.cycle import run
from scheduling.cycle.run import Kept, collected_once


class Node:
    """An object that takes part in a reference cycle."""

    def __init__(self) -> None:
        self.other = self


@pytest.fixture(autouse=True)
def whole_heap_after():
    yield
    gc.unfreeze()   # leave the test process's heap as it found it
    gc.enable()


def test_the_collector_is_off_during_the_cycle_and_on_after_it():
    assert gc.isenabled()
    with collected_once(Kept()):
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() > 0


def test_a_cycle_that_fails_still_turns_the_collector_back_on():
    with pytest.raises(RuntimeError), collected_once(Kept()):
        raise RuntimeError("the cycle failed")
    assert gc.isenabled()


def test_the_collector_stays_off_where_the_caller_had_turned_it_off():
    gc.disable()
    with collected_once(Kept()):
        pass
    assert not gc.isenabled()


def test_garbage_the_cycle_left_is_freed_at_once():
    kept = Kept()
    with collected_once(kept):
        left = weakref.ref(Node())   # unreachable already: only the cyclic collector frees it
        assert left() is not None
    assert left() is None


def test_a_frozen_cycle_that_becomes_garbage_is_freed_by_the_whole_heap_pass(monkeypatch):
    monkeypatch.setattr(run, "WHOLE_HEAP_EVERY", 3)
    kept = Kept()
    held = Node()
    with collected_once(kept):
        pass
    watched = weakref.ref(held)
    del held   # a garbage cycle among frozen objects: ordinary passes skip it
    with collected_once(kept):
        pass
    assert watched() is not None and kept.frozen_cycles == 2
    with collected_once(kept):   # the third cycle: the heap is unfrozen and collected whole
        pass
    assert watched() is None and kept.frozen_cycles == 0
