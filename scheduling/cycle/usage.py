"""Each queue's past GPU usage for time-based fair share: the GPU-time its replicas held over the
window (FAIR_SHARE_WINDOW_DAYS), each second weighted 0.5^(age / half-life), as a fraction of what
the cluster's GPUs could have given over the same window with the same weighting."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from scheduling.models import Replica


def decayed_seconds(newest_age_s: float, oldest_age_s: float, half_life_s: float) -> float:
    """The integral of 0.5^(age / half-life) over ages [newest, oldest]."""
    tau = half_life_s / math.log(2)
    return tau * (math.exp(-newest_age_s / tau) - math.exp(-oldest_age_s / tau))


def queue_usage(now: datetime, capacity_milli: int) -> dict[str, float]:
    """Normalised decayed usage per queue (0..1); empty when the half-life setting is 0 (off)."""
    half_life_s = settings.FAIR_SHARE_HALF_LIFE_H * 3600
    window_s = settings.FAIR_SHARE_WINDOW_DAYS * 86400
    if half_life_s <= 0 or window_s <= 0 or capacity_milli <= 0:
        return {}
    since = now - timedelta(seconds=window_s)
    rows = Replica.objects.filter(started__isnull=False, started__lt=now, node__isnull=False).filter(
        Q(ended__isnull=True) | Q(ended__gt=since)).values_list("job__queue__name", "started", "ended",
                                                               "gpu_indices", "slice")
    used: dict[str, float] = {}
    for queue, started, ended, gpus, held in rows:
        newest = max((now - min(ended or now, now)).total_seconds(), 0.0)
        oldest = min((now - started).total_seconds(), window_s)
        if queue is None or oldest <= newest:
            continue
        milli = int((held or {}).get("gpu_milli") or 1000) * len(gpus or ())
        used[queue] = used.get(queue, 0.0) + milli * decayed_seconds(newest, oldest, half_life_s)
    possible = capacity_milli * decayed_seconds(0.0, window_s, half_life_s)
    return {queue: value / possible for queue, value in used.items()}
