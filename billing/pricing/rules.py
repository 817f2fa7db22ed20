"""Price rules: the ordered list that turns what a replica holds into its price per hour.

Pure module (no Django). A rule looks at the priced option (what is held, at which priority, on spot
capacity or not), the time window it is priced for and the workspace, and returns an
:class:`Adjustment` (a factor and a reason code with its figures) or None. :func:`fold` starts from
the list price (one GPU of the model at the table's rate, plus CPU and memory) and applies the
adjustments in the order of the list; the caller rounds the result once (``hourly_price``).

An adjustment of the GPU line (``gpu_line=True``: the sharing slice) scales the GPU part only and
must come before the rules that scale the whole price. The order of the whole-price rules is the
order their factors are multiplied in, which decides the last digit of a rounded rate: keep it.

A rule whose answer depends on the time says where it may change (:meth:`PriceRule.boundaries`);
estimates and metering cut their windows there, so each window has one answer per rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from decimal import Decimal
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from scheduling.api import as_zone

if TYPE_CHECKING:  # billing.pricing imports this module for its default list
    from billing.pricing import Allocation, Rates

# Reason codes (stable: statements, quotes and tests name them)
GPU_SHARE = "gpu_share"
PRIORITY = "priority"
OFF_PEAK = "off_peak"
SPOT = "spot"
WEEKEND = "weekend"
STORAGE = "storage"
BY_DEADLINE = "by_deadline"

# A storage price is per GiB-month; a month of storage is billed as this many hours (365 x 24 / 12), so
# a GiB kept a whole year costs twelve months' price whatever the months' lengths.
HOURS_PER_MONTH = Decimal(730)

_SATURDAY = 5
_HUNDRED = Decimal(100)


class PricedOption(NamedTuple):
    """The priced choice: what one replica holds (GPU model and charged share, CPU, memory), its
    priority and whether it runs on spot (interruptible) capacity."""

    allocation: Allocation
    priority: int = 0
    spot: bool = False
    # work priced "by the deadline" (it waits for idle GPUs until its latest start), with its pool's discount;
    # None: the table's off-peak discount
    by_deadline: bool = False
    deadline_discount: Decimal | None = None


class PriceWindow(NamedTuple):
    """The stretch of time a rate is for, cut so that every rule has one answer in it. No start: a
    rate not tied to a time (a list price); ``offpeak``: inside the table's off-peak windows."""

    start: datetime | None = None
    end: datetime | None = None
    offpeak: bool = False


class PricedWorkspace(NamedTuple):
    """Who pays: its calendar days are read in ``time_zone`` (the platform's when it has none)."""

    time_zone: tzinfo | str = "UTC"

    @property
    def zone(self) -> tzinfo:
        return as_zone(self.time_zone)


class PricedStorage(NamedTuple):
    """Storage priced for an hour: the GiB used (measured, not requested) in one storage class."""

    storage_class: str
    used_gib: Decimal


class Adjustment(NamedTuple):
    """A factor a rule applies, with its reason code and the figures that code names."""

    code: str
    factor: Decimal
    params: Mapping[str, Any] = MappingProxyType({})
    gpu_line: bool = False  # scales the GPU part only (before the whole-price rules)


class PriceRule:
    """One price rule: :meth:`adjust` answers for one window; :meth:`boundaries` lists the instants
    in [start, end) where that answer may change (none for a rule that does not look at the time).
    ``timed``: the answer depends on the window's time (not only on whether it is off-peak)."""

    timed = False

    def adjust(
        self, rates: Rates, option: PricedOption, window: PriceWindow, workspace: PricedWorkspace
    ) -> Adjustment | None:
        raise NotImplementedError

    def boundaries(self, start: datetime, end: datetime, workspace: PricedWorkspace) -> Iterable[datetime]:
        return ()

    def adjust_storage(
        self, rates: Rates, storage: PricedStorage, window: PriceWindow, workspace: PricedWorkspace
    ) -> Adjustment | None:
        """The rule's answer for stored GiB; the GPU-time rules leave storage alone."""
        return None


@dataclass(frozen=True)
class SharingSlice(PriceRule):
    """The GPU line is charged for the share held: whole GPUs, a fraction, MIG slices or a time slice."""

    def adjust(self, rates, option, window, workspace):
        share = option.allocation.share
        if share in (0, 1):  # no GPU line, or one whole GPU: the list price
            return None
        return Adjustment(GPU_SHARE, share, {"share": share}, gpu_line=True)


@dataclass(frozen=True)
class Priority(PriceRule):
    """Higher priority costs more: base + priority x step."""

    def adjust(self, rates, option, window, workspace):
        multiplier = rates.priority_multiplier(option.priority)
        if multiplier == 1:
            return None
        return Adjustment(PRIORITY, multiplier, {"priority": option.priority})


@dataclass(frozen=True)
class OffPeak(PriceRule):
    """Time inside the table's off-peak windows is cheaper (the windows cut the time, see PriceWindow)."""

    def adjust(self, rates, option, window, workspace):
        if not window.offpeak:
            return None
        return Adjustment(OFF_PEAK, rates.offpeak_factor, {"discount": rates.offpeak_discount})


@dataclass(frozen=True)
class ByDeadline(PriceRule):
    """Work that may wait for its deadline runs in the gaps, so it is priced like off-peak: its pool's deadline
    discount (the table's off-peak discount unless the operator set one) outside the off-peak windows. Inside
    them the off-peak discount applies already, and the two are not stacked."""

    def adjust(self, rates, option, window, workspace):
        if not option.by_deadline or window.offpeak:
            return None
        discount = rates.offpeak_discount if option.deadline_discount is None else option.deadline_discount
        if not discount:
            return None
        return Adjustment(BY_DEADLINE, 1 - discount, {"discount": discount})


@dataclass(frozen=True)
class Spot(PriceRule):
    """Spot capacity can be reclaimed at any time, and costs less."""

    def adjust(self, rates, option, window, workspace):
        if not option.spot:
            return None
        return Adjustment(SPOT, rates.spot_factor, {"discount": rates.spot_discount})


@dataclass(frozen=True)
class WeekendDiscount(PriceRule):
    """``percent`` off on Saturdays and Sundays, as the workspace's calendar reads them. Off unless
    the list includes it (settings.BILLING_WEEKEND_DISCOUNT)."""

    percent: Decimal
    timed = True

    def __post_init__(self) -> None:
        if not isinstance(self.percent, Decimal) or not 0 < self.percent <= _HUNDRED:
            raise ValueError(f"weekend discount must be a Decimal percentage above 0 and at most 100, got {self.percent!r}")

    def adjust(self, rates, option, window, workspace):
        if window.start is None or window.start.astimezone(workspace.zone).weekday() < _SATURDAY:
            return None
        return Adjustment(WEEKEND, 1 - self.percent / _HUNDRED, {"percent": self.percent})

    def boundaries(self, start, end, workspace):
        zone = workspace.zone
        day = start.astimezone(zone).date()
        while True:
            day += timedelta(days=1)
            midnight = _local_midnight(day, zone)
            if midnight >= end:
                return
            if day.weekday() in (_SATURDAY, 0):  # the weekend starts, or ends
                yield midnight


@dataclass(frozen=True)
class StorageUsed(PriceRule):
    """Stored GiB cost their class's price per GiB-month, spread over the hours of a month
    (HOURS_PER_MONTH); billed on the bytes used, sampled each hour, never on the size requested."""

    def adjust(self, rates, option, window, workspace):
        return None  # held GPUs, cores and memory are no storage

    def adjust_storage(self, rates, storage, window, workspace):
        per_gib_month = rates.storage_rate(storage.storage_class)
        if per_gib_month is None:
            return None
        return Adjustment(STORAGE, per_gib_month / HOURS_PER_MONTH,
                          {"storage_class": storage.storage_class, "per_gib_month": per_gib_month})


def _local_midnight(day: date, zone: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone)


DEFAULT_RULES: tuple[PriceRule, ...] = (SharingSlice(), Priority(), OffPeak(), ByDeadline(), Spot(), StorageUsed())


def price_rules(*, weekend_discount: Decimal | None = None) -> tuple[PriceRule, ...]:
    """The active list: the default rules, then the weekend discount when a percentage is configured."""
    if not weekend_discount:
        return DEFAULT_RULES
    return (*DEFAULT_RULES, WeekendDiscount(weekend_discount))


def fold(
    rules: Sequence[PriceRule], rates: Rates, option: PricedOption, window: PriceWindow, workspace: PricedWorkspace
) -> tuple[Decimal, tuple[Adjustment, ...]]:
    """The unrounded price per hour and the adjustments that made it, in the order of ``rules``."""
    allocation = option.allocation
    gpu = Decimal(0)
    if allocation.share > 0:  # Allocation guarantees vendor and model here
        gpu = rates.gpu_rate(allocation.vendor or "", allocation.gpu_model or "")
    price: Decimal | None = None
    applied: list[Adjustment] = []
    for rule in rules:
        adjustment = rule.adjust(rates, option, window, workspace)
        if adjustment is None:
            continue
        applied.append(adjustment)
        if adjustment.gpu_line:
            if price is not None:
                raise ValueError(f"price rule {rule!r} scales the GPU line after a rule scaled the whole price")
            gpu *= adjustment.factor
            continue
        if price is None:
            price = _list_price(gpu, allocation, rates)
        price *= adjustment.factor
    if price is None:
        price = _list_price(gpu, allocation, rates)
    return price, tuple(applied)


def fold_storage(
    rules: Sequence[PriceRule], rates: Rates, storage: PricedStorage, window: PriceWindow, workspace: PricedWorkspace
) -> tuple[Decimal, tuple[Adjustment, ...]] | None:
    """The unrounded price per hour of the GiB used, and the adjustments that made it: the used GiB times
    every storage factor in the order of ``rules``. None when no rule prices the class (it is not billed)."""
    applied = tuple(a for rule in rules if (a := rule.adjust_storage(rates, storage, window, workspace)) is not None)
    if not any(a.code == STORAGE for a in applied):
        return None
    price = storage.used_gib
    for adjustment in applied:
        price *= adjustment.factor
    return price, applied


def _list_price(gpu: Decimal, allocation: Allocation, rates: Rates) -> Decimal:
    return gpu + allocation.cpu_cores * rates.cpu_core_hour + allocation.memory_gib * rates.memory_gib_hour


def cut_points(
    rules: Sequence[PriceRule], start: datetime, end: datetime, workspace: PricedWorkspace
) -> list[datetime]:
    """The instants strictly inside (start, end) where a rule's answer may change, sorted."""
    return sorted({at for rule in rules for at in rule.boundaries(start, end, workspace) if start < at < end})
