"""MIG profiles of every card that offers MIG: the one table the platform reads them from.

Source: NVIDIA Multi-Instance GPU User Guide, release r580 (2025), section "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html). Each profile
has its name as NVIDIA writes it (<g>g.<memory>gb), its memory in GB as that name gives it, the compute
slices (g) and memory slices it takes, how many instances of it one GPU can hold, and the memory one
instance really has (MiB, as NVML's memorySizeMB and `nvidia-smi mig -lgip` report it): less than the
name says (a 1g.18gb on an H200 holds 16384 MiB, not 18432), so fitting a need uses that figure.

The media-extension variants (+me, +gfx...) are left out: they have the memory and SMs of their plain
profile (the H200 lists 1g.18gb+me at 16384 MiB, 16 SMs, one per GPU) and only add media engines; jobs
and layouts name the plain profile.

Card names follow the platform's GPU model names (<MODEL>-<memory>GB, e.g. "H100-80GB"); `aliases`
are other spellings a pool may use for the same card.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import gpu_model_name, model_family

MIG_SOURCE = ("NVIDIA Multi-Instance GPU User Guide r580, Supported MIG Profiles "
              "(docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html)")


@dataclass(frozen=True)
class MigProfile:
    name: str
    memory_gb: int           # the figure in the name
    compute_slices: int
    memory_slices: int
    max_instances: int
    memory_mib: int          # what one instance can use (NVML memorySizeMB)


@dataclass(frozen=True)
class MigCard:
    model: str
    compute_slices: int      # slices of the GPU's SMs MIG hands out (7, or 4 on the A30)
    memory_slices: int       # slices of its memory (8, or 4 on the A30)
    profiles: tuple[MigProfile, ...]
    aliases: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)


_SLICES_7 = (1, 2, 2, 4, 4, 8)   # memory slices of the six shapes of a seven-slice card

# Seven-slice cards: model, sizes in GB of 1g (1 memory slice), 1g (2), 2g, 3g, 4g, 7g as the names give
# them, then the MiB one instance of each really has as NVML / `nvidia-smi mig -lgip` report it (None:
# no published figure; estimated below), then aliases. Where two readings differ (drivers), the lower is kept.
_CARDS_7: tuple[tuple, ...] = (
    # github.com/NVIDIA/go-nvml/blob/main/pkg/nvml/mock/shared/gpus/a100.go (A100-40GB profiles)
    ("A100-40GB", (5, 10, 10, 20, 20, 40), (4864, 9856, 9856, 19968, 19968, 40192)),
    # 1g/2g: github.com/kata-containers/kata-containers/blob/main/docs/use-cases/NVIDIA-GPU-passthrough-and-Kata.md;
    # 3g/4g/7g: the go-nvml A100 file above (A100-80GB profiles)
    ("A100-80GB", (10, 20, 20, 40, 40, 80), (9728, 19968, 19968, 40192, 40192, 80384)),
    # jbarrow.ai/field_notes/nvidia-mig/ (nvidia-smi mig -lgip on an H100 80GB HBM3)
    ("H100-80GB", (10, 20, 20, 40, 40, 80), (9984, 20096, 20096, 40448, 40448, 81152),
     "H100-SXM-80GB", "H100-PCIE-80GB"),
    # docs.opennebula.io/7.0/product/cluster_configuration/hosts_and_clusters/vgpu (H100 NVL lgip), 0.12-0.5 GiB
    # under github.com/NVIDIA/gpu-operator/pull/900
    ("H100-94GB", (12, 24, 24, 47, 47, 94), (10880, 22016, 22016, 47232, 47232, 94848), "H100-NVL-94GB"),
    # measured: NVML on an H200, driver 580.159.04 (tests/data/device/); github.com/NVIDIA/mig-parted/issues/120
    # shows an older driver 0.25 GiB lower on 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb
    ("H200-141GB", (18, 35, 35, 71, 71, 141), (16384, 33280, 33280, 71424, 71424, 143360), "H200-NVL-141GB"),
    # estimated: no published reading found
    ("GH200-96GB", (12, 24, 24, 48, 48, 96), (None, None, None, None, None, None)),
    # 1g/2g: github.com/NVIDIA/mig-parted/pull/139; 3g/4g/7g estimated
    ("GH200-144GB", (18, 36, 36, 72, 72, 144), (17920, 36096, 36096, None, None, None)),
    # 1g/2g: github.com/NVIDIA/mig-parted/pull/187 (pull/166 read 22.00 GiB for 1g); 3g/4g/7g estimated
    ("B200-180GB", (23, 45, 45, 90, 90, 180), (20992, 45312, 45312, None, None, None), "B200-192GB"),
)

# The estimate for a missing figure: the named memory times the lowest real/named ratio published for the
# same memory-slice count (the H200's reading and the other cards above), rounded down to 128 MiB. The
# H200's ratio alone would overstate some A100 and H100 NVL profiles; the lowest errs low everywhere.
_LOWEST_RATIO: dict[int, float] = {}
for _model, _sizes, _real, *_ in _CARDS_7:
    for _mib, _gb, _slices in zip(_real, _sizes, _SLICES_7, strict=True):
        if _mib is not None:
            _LOWEST_RATIO[_slices] = min(_LOWEST_RATIO.get(_slices, 1.0), _mib / (_gb * 1024))
del _model, _sizes, _real, _mib, _gb, _slices


def _estimated(named_gb: int, memory_slices: int) -> int:
    return int(named_gb * 1024 * _LOWEST_RATIO[memory_slices]) // 128 * 128


def _seven_slice(model: str, sizes: tuple[int, ...], real: tuple[int | None, ...], *aliases: str) -> MigCard:
    """A 7-compute / 8-memory-slice card (A100, H100, H200, GH200, B200): the same six shapes."""
    mib = [m if m is not None else _estimated(gb, n) for m, gb, n in zip(real, sizes, _SLICES_7, strict=True)]
    one, one_double, two, three, four, seven = sizes
    return MigCard(model, 7, 8, (
        MigProfile(f"1g.{one}gb", one, 1, 1, 7, mib[0]),
        MigProfile(f"1g.{one_double}gb", one_double, 1, 2, 4, mib[1]),
        MigProfile(f"2g.{two}gb", two, 2, 2, 3, mib[2]),
        MigProfile(f"3g.{three}gb", three, 3, 4, 2, mib[3]),
        MigProfile(f"4g.{four}gb", four, 4, 4, 1, mib[4]),
        MigProfile(f"7g.{seven}gb", seven, 7, 8, 1, mib[5]),
    ), aliases)


MIG_CARDS: tuple[MigCard, ...] = (
    # github.com/NVIDIA/go-nvml/blob/main/pkg/nvml/mock/shared/gpus/a30.go (lower than public lgip outputs,
    # 5.81 / 11.69 / 23.44 GiB)
    MigCard("A30-24GB", 4, 4, (
        MigProfile("1g.6gb", 6, 1, 1, 4, 5836),
        MigProfile("2g.12gb", 12, 2, 2, 2, 11672),
        MigProfile("4g.24gb", 24, 4, 4, 1, 23344),
    )),
    *(_seven_slice(model, sizes, real, *aliases) for model, sizes, real, *aliases in _CARDS_7),
)

_BY_NAME = {gpu_model_name(name): card for card in MIG_CARDS for name in (card.model, *card.aliases)}


def mig_card(gpu_model: str, gpu_memory_mib: int | None = None) -> MigCard | None:
    """The MIG card a pool's GPU model names; a bare family name ("H200", or NVML's "NVIDIA H200") is told
    apart by its memory."""
    name = gpu_model_name(gpu_model)
    if name in _BY_NAME:
        return _BY_NAME[name]
    if gpu_memory_mib:
        gb = round(gpu_memory_mib / 1024)
        # NVML's names lead with the vendor and say the form factor: "NVIDIA H200", "NVIDIA A100-SXM4-80GB".
        named = model_family(name)
        family = [c for c in MIG_CARDS if named and c.model.split("-")[0] == named]
        return min(family, key=lambda c: abs(c.profiles[-1].memory_gb - gb), default=None) if family else None
    return None


# Every profile name on any card: compute slices and the usable memory (MiB) of one instance. Cards that
# share a name (1g.10gb on the A100s and the H100-80GB, 1g.18gb on the H200 and GH200-144GB) agree on the
# slices but not quite on the memory; the table is keyed by name, so it keeps the smallest: a need that
# fits it fits the profile on every card.
MIG_PROFILES: dict[str, tuple[int, int]] = {}
for _card in MIG_CARDS:
    for _p in _card.profiles:
        _known = MIG_PROFILES.get(_p.name)
        MIG_PROFILES[_p.name] = (_p.compute_slices, min(_p.memory_mib, _known[1]) if _known else _p.memory_mib)
del _card, _p, _known


def layout_errors(card: MigCard, layout: list[str] | tuple[str, ...]) -> list[tuple[str, dict]]:
    """Why `layout` (the instances on every GPU) does not fit `card`: (code, figures) pairs for the caller to
    word; empty when it fits. Codes: "not_profiles", "compute_slices", "memory_slices", "too_many"."""
    wrong = [p for p in layout if card.profile(p) is None]
    if wrong:
        return [("not_profiles", {"wrong": ", ".join(wrong), "model": card.model, "family": ", ".join(card.names)})]
    profiles = [card.profile(p) for p in layout]
    errors: list[tuple[str, dict]] = []
    compute = sum(p.compute_slices for p in profiles)
    memory = sum(p.memory_slices for p in profiles)
    if compute > card.compute_slices:
        errors.append(("compute_slices", {"used": compute, "model": card.model, "has": card.compute_slices}))
    if memory > card.memory_slices:
        errors.append(("memory_slices", {"used": memory, "model": card.model, "has": card.memory_slices}))
    for p in card.profiles:
        if layout.count(p.name) > p.max_instances:
            errors.append(("too_many", {"count": layout.count(p.name), "profile": p.name, "most": p.max_instances}))
    return errors


__all__ = ["MIG_CARDS", "MIG_PROFILES", "MIG_SOURCE", "MigCard", "MigProfile", "layout_errors", "mig_card"]
