"""The workspace page's queues and waiting jobs: each queue's figures now and its last 7 days of
allocation (the console's samples, drawn by static/console/queue_history.js), and the workspace's
pending jobs with their place in their queue, reason and expected start."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from portal.workspace_queues import HISTORY_DAYS, queue_histories, waiting_jobs, workspace_queues
from scheduling.api import clock


def _wall(moment) -> str:
    # wall times in the viewer's zone: plotly drops a time's UTC offset and would draw UTC
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


def queue_context(workspace) -> dict:
    """What templates/portal/_workspace_queues.html shows, for a workspace the caller may see."""
    now = clock.now()
    queues = workspace_queues(workspace, now)
    histories = queue_histories(workspace, now)
    charts = {}
    for q in queues:
        h = histories[q.name]
        charts[q.name] = {
            "queue": q.name, "times": [None if t is None else _wall(t) for t in h.times],
            "allocated": h.allocated, "deserved": h.deserved, "fair_share": h.fair_share,
            "start": _wall(h.start), "end": _wall(h.end), "samples": h.samples,
        }
    return {
        "queues": queues, "queue_charts": charts, "queue_samples": [(q, charts[q.name]["samples"]) for q in queues], "history_days": HISTORY_DAYS,
        "history_interval_min": f"{settings.QUEUE_HISTORY_INTERVAL_S / 60:g}",
        "waiting": waiting_jobs(workspace, now),
    }
