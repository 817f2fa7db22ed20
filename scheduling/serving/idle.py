"""When a notebook counts as idle (pure): no kernel activity and no GPU use for its idle time.

The notebook server reports the time of its last kernel activity (a cell started or finished, a
kernel started); the node agent's samples give the last time its slice was used above the pool's
threshold. The notebook is idle from the later of the two; it stops once that has lasted
`idle_after_s` (the spec's `idleAfter`, else its pool's idle window).
"""

from __future__ import annotations


def idle_since(last_kernel_activity: float, last_gpu_use: float | None, started: float) -> float:
    """Epoch seconds from which the notebook has been idle (its start when nothing happened since)."""
    return max(started, last_kernel_activity, last_gpu_use if last_gpu_use is not None else started)
