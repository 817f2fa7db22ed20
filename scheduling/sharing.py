"""GPU sharing modes: what a replica's stored slice means, one class per mode.

A replica's `slice` is stored as a dict whose "kind" names its mode: "whole" (whole GPUs), "fraction"
(`gpu_milli`, `gpu_mem_mib`), "mig" (`mig_profile`) or "timeslice" (`timeslice_slot`). `mode_of(slice)`
finds its class; a missing or unknown kind is whole.
Each mode answers the GPUs it holds (metrics), its label (`Replica.slice_label`), the arguments of
billing's charged share, and what it adds to a GPU's tally (the console's free GPUs), so a new mode is
one class here rather than a branch in each of those places.

The scheduler core has its own model of a request's mode (`core.model.Request.mode`); this is the
stored placement's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduling.core.model import mig_milli
from scheduling.core.units import MIB_PER_GIB, MILLI_PER_GPU
from scheduling.formats import gpus_number

if TYPE_CHECKING:
    from scheduling.models import NodePool

Slice = Mapping[str, Any]
# A whole GPU leaves none of its memory free, whatever the card has.
WHOLE_GPU_MEM_MIB = 1 << 40


@dataclass
class GpuHolds:
    """What the replicas on one GPU hold together."""

    milli: int = 0
    mem_mib: int = 0
    mig: list[str] = field(default_factory=list)  # the profiles of its MIG instances taken
    slots: int = 0  # time slices taken


class SharingMode:
    kind = ""
    sharing = ""  # billing's name for the mode (`pricing.Sharing`)

    def gpus_held(self, piece: Slice, pool: NodePool | None) -> float:
        """GPUs one replica holds on each of its GPUs."""
        raise NotImplementedError

    def label(self, piece: Slice, gpu_count: int) -> str:
        """What the replica holds, as the ledger and pages name it: '2 GPUs', '0.5 GPU + 10 GiB',
        'MIG 3g.40gb', 'time-slice slot 1 on 2 GPUs', 'CPU only'. The ledger stores it on charge lines,
        so it is not translated."""
        raise NotImplementedError

    def charge_args(self, piece: Slice, gpu_count: int, pool: NodePool) -> dict[str, Any]:
        """The keyword arguments of `pricing.charged_gpu_share(self.sharing, ...)` for a placement
        holding `gpu_count` (> 0) GPUs."""
        raise NotImplementedError

    def tally(self, piece: Slice, held: GpuHolds) -> None:
        """Add what one replica holds on one of its GPUs to that GPU's `held`."""
        raise NotImplementedError


class Whole(SharingMode):
    kind = "whole"
    sharing = "exclusive"  # what quotes and prices call a whole GPU

    def gpus_held(self, piece: Slice, pool: NodePool | None) -> float:
        return 1.0

    def label(self, piece: Slice, gpu_count: int) -> str:
        return f"{gpu_count} GPU{'s' if gpu_count != 1 else ''}" if gpu_count else "CPU only"

    def charge_args(self, piece: Slice, gpu_count: int, pool: NodePool) -> dict[str, Any]:
        return {"num_gpus": gpu_count}

    def tally(self, piece: Slice, held: GpuHolds) -> None:
        held.milli += MILLI_PER_GPU
        held.mem_mib = WHOLE_GPU_MEM_MIB


class Fraction(SharingMode):
    kind = sharing = "fraction"

    def gpus_held(self, piece: Slice, pool: NodePool | None) -> float:
        return piece.get("gpu_milli", MILLI_PER_GPU) / MILLI_PER_GPU

    def label(self, piece: Slice, gpu_count: int) -> str:
        share = f"{gpus_number(piece.get('gpu_milli', 0))} GPU"
        mem_mib = piece.get("gpu_mem_mib") or 0  # the memory is named only when some is reserved
        return f"{share} + {mem_mib / MIB_PER_GIB:g} GiB" if mem_mib else share

    def charge_args(self, piece: Slice, gpu_count: int, pool: NodePool) -> dict[str, Any]:
        # a 0 is not given: pricing charges the larger of the compute and memory shares it is given
        return {"gpu_milli": piece.get("gpu_milli") or None, "gpu_mem_mib": piece.get("gpu_mem_mib") or None,
                "gpu_total_mem_mib": pool.gpu_memory_mib}

    def tally(self, piece: Slice, held: GpuHolds) -> None:
        held.milli += int(piece.get("gpu_milli", 0))
        held.mem_mib += int(piece.get("gpu_mem_mib", 0))


class Mig(SharingMode):
    kind = sharing = "mig"

    def gpus_held(self, piece: Slice, pool: NodePool | None) -> float:
        return mig_milli(piece.get("mig_profile", "")) / MILLI_PER_GPU

    def label(self, piece: Slice, gpu_count: int) -> str:
        return f"MIG {piece.get('mig_profile', '')}"

    def charge_args(self, piece: Slice, gpu_count: int, pool: NodePool) -> dict[str, Any]:
        return {"mig_profile": piece["mig_profile"]}

    def tally(self, piece: Slice, held: GpuHolds) -> None:
        held.mig.append(piece.get("mig_profile", ""))


class Timeslice(SharingMode):
    kind = sharing = "timeslice"

    def gpus_held(self, piece: Slice, pool: NodePool | None) -> float:
        return 1 / max(1, pool.timeslice_replicas if pool else 1)

    def label(self, piece: Slice, gpu_count: int) -> str:
        slot = f"time-slice slot {piece.get('timeslice_slot', 0)}"
        return slot + (f" on {gpu_count} GPUs" if gpu_count > 1 else "")

    def charge_args(self, piece: Slice, gpu_count: int, pool: NodePool) -> dict[str, Any]:
        return {"num_gpus": gpu_count, "timeslice_replicas": pool.timeslice_replicas}

    def tally(self, piece: Slice, held: GpuHolds) -> None:
        held.slots += 1


WHOLE = Whole()
MODES: dict[str, SharingMode] = {m.kind: m for m in (WHOLE, Fraction(), Mig(), Timeslice())}


def mode_of(piece: Slice | None) -> SharingMode:
    """The sharing mode of a stored slice (None, or a missing or unknown kind: whole)."""
    return MODES.get((piece or {}).get("kind", "whole"), WHOLE)
