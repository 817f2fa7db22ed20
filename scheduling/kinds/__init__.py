"""Workload kinds: one object per kind (training, notebook, inference), one module each.

A kind object answers every question the platform asks about a kind (how its spec is read, what its
launch adds, whether it is interactive, how it idles, whether it stops and starts, how it is quoted),
so that no module outside this package compares a kind's name. `registry` maps names to objects.
A training job's launch type (single, pytorch, mpi) is one object each too, in `launch_types`.
"""

from scheduling.kinds.base import (
    IDLE_CANCEL,
    IDLE_STOP,
    OVERDUE_FAIL,
    OVERDUE_STOP,
    RATES_PER_HOUR,
    RATES_PER_REPLICAS,
)
from scheduling.kinds.launch_types import DEFAULT as DEFAULT_LAUNCH_TYPE
from scheduling.kinds.launch_types import DISTRIBUTED as DISTRIBUTED_LAUNCH_TYPE
from scheduling.kinds.launch_types import MASTER, WORKER, LaunchType, launch_type, stored_launch_type
from scheduling.kinds.launch_types import find as find_launch_type
from scheduling.kinds.launch_types import names as launch_type_names
from scheduling.kinds.registry import (
    DEFAULT,
    all,
    autoscaled,
    choices,
    find,
    get,
    idled_by_activity,
    kind_of,
    listed_on,
    names,
    names_where,
    personal,
    register,
    unregister,
)

__all__ = ["IDLE_CANCEL", "IDLE_STOP", "OVERDUE_FAIL", "OVERDUE_STOP", "RATES_PER_HOUR", "RATES_PER_REPLICAS", "DEFAULT", "all", "autoscaled", "choices", "find", "get", "idled_by_activity", "kind_of", "listed_on", "names", "names_where",
           "personal", "register", "unregister",
           "DEFAULT_LAUNCH_TYPE", "DISTRIBUTED_LAUNCH_TYPE", "MASTER", "WORKER", "LaunchType", "find_launch_type", "launch_type",
           "launch_type_names", "stored_launch_type"]
