"""A trickle of demo jobs from both workspaces, so a newcomer sees the cluster work.

Each call submits one job picked by a seeded generator from a small catalogue of the sharing
modes, unless the workspace already has enough jobs waiting.
"""

from __future__ import annotations

import random

from django.contrib.auth import get_user_model

from billing.api import submit_quoted_job
from portal.models import Workspace
from scheduling.kinds import launch_type
from scheduling.models import Job, JobState

MAX_PENDING_PER_WORKSPACE = 4

CATALOGUE = [
    ("notebook-{n}", "single", "fraction", "{{gpu: 0.3, gpuMemory: 12Gi, cpu: 2, memory: 8Gi}}", "1h", "", False),
    ("finetune-{n}", "pytorch", "exclusive", "{{gpu: 1, cpu: 8, memory: 32Gi}}", "2h", "", False),
    ("sweep-{n}", "single", "exclusive", "{{gpu: 1, cpu: 4, memory: 16Gi}}", "1h", "community", True),
    ("serve-{n}", "single", "mig", "{{mig: 2g.20gb, cpu: 2, memory: 8Gi}}", "3h", "", False),
    ("render-{n}", "single", "timeslice", "{{gpu: 1, cpu: 2, memory: 8Gi}}", "30m", "", False),
    ("pretrain-{n}", "pytorch", "exclusive", "{{gpu: 8, cpu: 64, memory: 512Gi}}", "4h", "", True),
    ("flaky-{n}", "single", "exclusive", "{{gpu: 1, cpu: 4, memory: 16Gi}}", "1h", "", False),
    ("resumable-{n}", "single", "exclusive", "{{gpu: 1, cpu: 4, memory: 16Gi}}", "2h", "community", True),
]
# A job whose first two runs fail 20 simulated minutes in (the simulated cluster's SIM_EXIT_CODE and
# SIM_FAIL_AFTER) and whose third succeeds, so the demo shows retries, their back-off and the attempts.
RETRIED = {
    "flaky-{n}": ["retry: {limit: 3, backoff: 30s, maxBackoff: 2m, on: [failed]}", "maxRuntime: 3h"],
    # preemptible and checkpointed: when the strict work above reclaims its GPU it saves its step, waits, and
    # resumes from it, so the demo shows a resumed job and the GPU-hours its eviction lost
    "resumable-{n}": ["checkpoint: {path: /ckpt, every: 10m}", "terminationGracePeriod: 60s"],
}
RETRIED_ENV = '{SIM_EXIT_CODE: "1,1,0", SIM_FAIL_AFTER: 20m}'


def demo_spec(rng: random.Random, n: int) -> str:
    name, job_type, sharing, resources, duration, queue, preemptible = rng.choice(CATALOGUE)
    # every demo job is written as one role; a distributed one may grow to two replicas
    replicas = "{min: 1, max: 2}" if launch_type(job_type).distributed else "{min: 1, max: 1}"
    lines = [f"name: {name.format(n=n)}", "type: single", f"priority: {rng.choice([0, 10, 20, 50])}",
             f"preemptible: {'true' if preemptible else 'false'}", f"expectedDuration: {duration}"]
    if queue:
        lines.append(f"queue: {queue}")
    lines += RETRIED.get(name, [])
    lines += ["roles:", "  - name: main", "    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
              f"    replicas: {replicas}", f"    sharing: {sharing}", f"    resources: {resources.format()}"]
    if name in RETRIED:
        lines.append(f"    env: {RETRIED_ENV}")
    return "\n".join(lines) + "\n"


def submit_demo_job(seed: int | None = None) -> Job | None:
    owners = {"vision-lab": "alice", "nlp-group": "bob"}
    rng = random.Random(seed)
    workspace = Workspace.objects.filter(slug__in=owners).order_by("?").first()
    if workspace is None:
        return None
    if Job.objects.filter(workspace=workspace, state=JobState.PENDING).count() >= MAX_PENDING_PER_WORKSPACE:
        return None
    user = get_user_model().objects.get(username=owners[workspace.slug])
    n = Job.objects.filter(workspace=workspace).count() + 1
    return submit_quoted_job(user=user, workspace=workspace, spec=demo_spec(rng, n))
