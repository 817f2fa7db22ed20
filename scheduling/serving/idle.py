"""When a notebook counts as idle (pure): no kernel activity and no GPU use for its idle time.

The notebook server reports the time of its last kernel activity (a cell started or finished, a
kernel started); the node agent's samples give the last time its slice was used above the pool's
threshold (and, where the server measures it, the last time its CPU was above `IDLE_CPU_PCT`). The
notebook is idle from the latest of these; it stops once that has lasted
`idle_after_s` (the spec's `idleAfter`, else its pool's idle window).
"""

from __future__ import annotations


def idle_since(last_kernel_activity: float, last_gpu_use: float | None, started: float,
               last_cpu_use: float | None = None) -> float:
    """Epoch seconds from which the notebook has been idle (its start when nothing happened since)."""
    used = [u for u in (last_gpu_use, last_cpu_use) if u is not None]
    return max(started, last_kernel_activity, *used)
