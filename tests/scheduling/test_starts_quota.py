"""A quote's quota check (`starts.quota_block`) is the cycle's (`gang.quota_block`): the same reason, with the
same figures, for the same work in the same queue tree."""

from __future__ import annotations

import pytest

from scheduling.core.actions.gang import quota_block as cycle_quota_block
from scheduling.core.builders import job, nodes
from scheduling.core.model import Pool, Queue, RunningReplica, Slice, Snapshot
from scheduling.core.session import Session
from scheduling.spec import parse_job_spec
from scheduling.starts import quota_block

SPEC = """\
name: quoted
preemptible: {preemptible}
roles:
  - name: worker
    image: busybox
    resources: {{gpu: {gpus}}}
"""


def session(*candidates):
    # the team's non-preemptible 2 GPUs are over its deserved 1; its department is limited to 8
    snapshot = Snapshot(
        pools=(Pool("h100"),), nodes=nodes("h100", 2, 8),
        queues=(Queue("dept", deserved_milli=4000, limit_milli=8000),
                Queue("team", parent="dept", deserved_milli=1000)),
        jobs=(job("held", "team", gpus=2, preemptible=False), *candidates),
        running=(RunningReplica("held", "worker", 0, "h100-0", (0, 1), Slice("whole", 1000, 81920)),),
    )
    return Session.build(snapshot)


@pytest.mark.parametrize(("gpus", "preemptible", "code"), [
    (1, False, "queue_non_preemptible_quota"),
    (1, True, None),
    (7, True, "queue_over_limit"),
    (0, False, None),   # work that adds no GPU is not held by the deserved quota, in the quote as in the cycle
])
def test_the_quote_says_what_the_cycle_says(gpus, preemptible, code):
    candidate = job("new", "team", gpus=gpus, preemptible=preemptible)
    s = session(candidate)
    spec = parse_job_spec(SPEC.format(gpus=gpus, preemptible=str(preemptible).lower()))
    quoted = quota_block(s, spec, {"pool": "h100"}, "team")
    assert quoted == cycle_quota_block(s, candidate, gpus * 1000)
    assert (quoted.code if quoted else None) == code
