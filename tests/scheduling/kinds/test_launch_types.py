"""A training job's launch types (single, pytorch, mpi): what each answers, and a name no type has."""

from __future__ import annotations

import re

import pytest

from scheduling import kinds
from scheduling.kinds.launch_types import SEED_TASK_TYPES
from scheduling.spec.model import JOB_TYPES


def test_the_types_by_name_in_the_order_a_spec_error_lists_them_and_single_is_the_default():
    assert kinds.launch_type_names() == JOB_TYPES == ("single", "pytorch", "mpi")
    assert kinds.DEFAULT_LAUNCH_TYPE == "single"
    assert [kinds.launch_type(name).name for name in JOB_TYPES] == list(JOB_TYPES)


def test_single_runs_one_role_of_any_name_alone():
    single = kinds.launch_type("single")
    assert (single.distributed, single.one_role, single.role_names, single.mpi_hostfile) == (False, True, (), False)
    assert single.seed_label == "other"


@pytest.mark.parametrize("name, hostfile, seed_label", [("pytorch", False, "PyTorch"), ("mpi", True, "MPI")])
def test_a_distributed_type_has_a_master_and_workers(name, hostfile, seed_label):
    launch = kinds.launch_type(name)
    assert launch.distributed and not launch.one_role
    assert launch.role_names == (kinds.MASTER, kinds.WORKER) == ("master", "worker")
    assert launch.mpi_hostfile is hostfile  # only MPI's launcher reads a hostfile of the job's ranks
    assert launch.seed_label == seed_label


def test_the_seed_forms_task_types_are_the_types_labels_in_its_own_order():
    assert SEED_TASK_TYPES == {"MPI": "mpi", "PyTorch": "pytorch", "other": "single"}
    assert list(SEED_TASK_TYPES) == ["MPI", "PyTorch", "other"]  # as its error lists them


def test_a_name_no_type_has():
    with pytest.raises(ValueError, match=re.escape("unknown launch type 'tensorflow'; one of single | pytorch | mpi")):
        kinds.launch_type("tensorflow")
    assert kinds.find_launch_type("tensorflow") is None
    assert kinds.find_launch_type(None) is None and kinds.find_launch_type(3) is None
    assert kinds.find_launch_type("mpi") is kinds.launch_type("mpi")


def test_a_stored_job_of_a_type_no_object_has_launches_as_single():
    # rows the spec readers did not write (a benchmark's, an old import) launch as before types had objects
    assert kinds.stored_launch_type("train") is kinds.launch_type("single")
    assert kinds.stored_launch_type("") is kinds.launch_type("single")
    assert kinds.stored_launch_type("mpi") is kinds.launch_type("mpi")


def test_a_spec_with_an_unknown_type_is_still_refused_with_its_choices():
    from scheduling.spec import SpecError, parse_job_spec

    with pytest.raises(SpecError, match=r"type 'tensorflow' is not one of single \| pytorch \| mpi"):
        parse_job_spec("name: a\ntype: tensorflow\nroles:\n  - {name: a, image: x, replicas: 1, resources: {gpu: 1}}\n")
