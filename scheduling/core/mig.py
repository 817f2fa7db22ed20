"""MIG profiles of every card that offers MIG: the one table the platform reads them from.

Source: NVIDIA Multi-Instance GPU User Guide, release r580 (2025), section "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html). Each profile
has its name as NVIDIA writes it (<g>g.<memory>gb), its memory in GB as that name gives it, the compute
slices (g) and memory slices it takes, and how many instances of it one GPU can hold. The media-
extension variants (+me, +gfx...) are left out: jobs ask for a profile by its plain name.

Card names follow the platform's GPU model names (<MODEL>-<memory>GB, e.g. "H100-80GB"); `aliases`
are other spellings a pool may use for the same card.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import gpu_model_name

MIG_SOURCE = ("NVIDIA Multi-Instance GPU User Guide r580, Supported MIG Profiles "
              "(docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html)")


@dataclass(frozen=True)
class MigProfile:
    name: str
    memory_gb: int
    compute_slices: int
    memory_slices: int
    max_instances: int


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


def _seven_slice(model: str, sizes: tuple[int, int, int, int, int, int], *aliases: str) -> MigCard:
    """A 7-compute / 8-memory-slice card (A100, H100, H200, GH200, B200): the same six shapes, its sizes in GB
    for 1g (1 memory slice), 1g (2), 2g, 3g, 4g and 7g."""
    one, one_double, two, three, four, seven = sizes
    return MigCard(model, 7, 8, (
        MigProfile(f"1g.{one}gb", one, 1, 1, 7),
        MigProfile(f"1g.{one_double}gb", one_double, 1, 2, 4),
        MigProfile(f"2g.{two}gb", two, 2, 2, 3),
        MigProfile(f"3g.{three}gb", three, 3, 4, 2),
        MigProfile(f"4g.{four}gb", four, 4, 4, 1),
        MigProfile(f"7g.{seven}gb", seven, 7, 8, 1),
    ), aliases)


MIG_CARDS: tuple[MigCard, ...] = (
    MigCard("A30-24GB", 4, 4, (
        MigProfile("1g.6gb", 6, 1, 1, 4),
        MigProfile("2g.12gb", 12, 2, 2, 2),
        MigProfile("4g.24gb", 24, 4, 4, 1),
    )),
    _seven_slice("A100-40GB", (5, 10, 10, 20, 20, 40)),
    _seven_slice("A100-80GB", (10, 20, 20, 40, 40, 80)),
    _seven_slice("H100-80GB", (10, 20, 20, 40, 40, 80), "H100-SXM-80GB", "H100-PCIE-80GB"),
    _seven_slice("H100-94GB", (12, 24, 24, 47, 47, 94), "H100-NVL-94GB"),
    _seven_slice("H200-141GB", (18, 35, 35, 71, 71, 141), "H200-NVL-141GB"),
    _seven_slice("GH200-96GB", (12, 24, 24, 48, 48, 96)),
    _seven_slice("GH200-144GB", (18, 36, 36, 72, 72, 144)),
    _seven_slice("B200-180GB", (23, 45, 45, 90, 90, 180), "B200-192GB"),
)

_BY_NAME = {gpu_model_name(name): card for card in MIG_CARDS for name in (card.model, *card.aliases)}


def mig_card(gpu_model: str, gpu_memory_mib: int | None = None) -> MigCard | None:
    """The MIG card a pool's GPU model names; a bare family name ("H200") is told apart by its memory."""
    name = gpu_model_name(gpu_model)
    if name in _BY_NAME:
        return _BY_NAME[name]
    if gpu_memory_mib:
        gb = round(gpu_memory_mib / 1024)
        family = [c for c in MIG_CARDS if c.model.split("-")[0] == name.split("-")[0]]
        return min(family, key=lambda c: abs(c.profiles[-1].memory_gb - gb), default=None) if family else None
    return None


# Every profile name on any card: compute slices and memory (MiB) per instance. A name says both, so
# cards that share a name agree on them.
MIG_PROFILES: dict[str, tuple[int, int]] = {
    p.name: (p.compute_slices, p.memory_gb * 1024) for card in MIG_CARDS for p in card.profiles}


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
