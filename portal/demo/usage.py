"""Two weeks of finished demo jobs, posted to the ledger, so the reports have something to
show right after `make run`."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.reports.services import day_bounds
from billing.services import platform_tz, submit_quoted_job
from portal.models import Membership, Role
from scheduling import clock
from scheduling.models import Job, JobState, Node, Replica

DEMO_PREFIX = "report-demo-"
_DEMO_SPECS = {  # pool: (resources, slice the placement holds)
    "h100": ("{gpu: 1, cpu: 4, memory: 16Gi}", {"kind": "whole", "gpu_milli": 1000}),
    "a100-spot": ("{gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}",
                  {"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 10240}),
    "rtx4090": ("{gpu: 1, cpu: 2, memory: 8Gi}", {"kind": "whole", "gpu_milli": 1000}),
}


def load_demo_usage(*, days: int = 14, now: datetime | None = None) -> int:
    """Finished demo jobs over the last `days` days in the demo workspaces, posted to the ledger
    so the reports have something to show right after `make run`. Idempotent: does nothing
    when demo jobs exist. Needs the demo tenants, cluster, queues and prices. Returns jobs made."""
    if Job.objects.filter(name__startswith=DEMO_PREFIX).exists():
        return 0
    now = now or clock.now()
    rng = random.Random(10)
    owners = [(m.user, m.workspace) for m in Membership.objects.filter(role=Role.OWNER).select_related(
        "user", "workspace").filter(workspace__slug__in=("vision-lab", "nlp-group"))]
    today = now.astimezone(platform_tz()).date()
    made = 0
    for back in range(days, 0, -1):
        day_start, _ = day_bounds(today - timedelta(days=back))
        for user, workspace in owners:
            for n in range(rng.randint(1, 3)):
                pool = rng.choice(sorted(_DEMO_SPECS))
                resources, slice_ = _DEMO_SPECS[pool]
                spec = (f"name: {DEMO_PREFIX}{workspace.slug}-{back}-{n}\nroles:\n  - name: main\n"
                        f"    image: busybox\n    resources: {resources}\n    nodePool: {pool}\n")
                job = submit_quoted_job(user=user, workspace=workspace, spec=spec)
                start = day_start + timedelta(hours=rng.randint(0, 20), minutes=rng.choice((0, 15, 30)))
                end = start + timedelta(minutes=rng.randint(30, 300))
                node = rng.choice(list(Node.objects.filter(pool__name=pool)))
                Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=node,
                                       gpu_indices=[rng.randrange(node.gpus.count() or 1)], slice=slice_,
                                       started=start, ended=end)
                job.state, job.started, job.finished = JobState.SUCCEEDED, start, end
                job.save(update_fields=["state", "started", "finished"])
                finalize_job_cost(job.pk)
                made += 1
    post_ledger(now=now)
    return made
