"""Prices, quotes and metered costs for GPU work.

Pure module (no Django). Money is ``Decimal`` with a currency, never float. Hourly rates are
kept to 4 decimal places; a total is rounded to the currency's minor unit once, at the end.

hourly price = (charged GPU share x GPU rate + CPU cores x CPU rate + memory GiB x memory rate)
               x priority multiplier x off-peak factor x by-the-deadline factor x spot factor

Each factor is a price rule (:mod:`billing.pricing.rules`); a table's ``rules`` is the ordered list
it prices with, and the hourly price is their fold, rounded once to 4 places.

Price tables carry an ``effective_from`` instant; work is always priced at the table in force
when it happened, so a new table never changes what was already charged or quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum

from billing.pricing.rules import (
    DEFAULT_RULES,
    Adjustment,
    PricedOption,
    PricedStorage,
    PricedWorkspace,
    PriceRule,
    PriceWindow,
    cut_points,
    fold,
    fold_storage,
)
from scheduling.api import (
    DEFAULT_OFFPEAK_WINDOWS,
    MIG_SLICES_PER_GPU,
    Window,
    as_zone,
    offpeak_intervals,
    require_aware,
    require_duration,
    split_hours,
    validate_windows,
)

# The amounts a price version sets: the same names on Rates, billing.models.PriceTable, its form and
# the console (billing.models.PRICE_FIELDS adds the version's name, currency, time and off-peak windows).
RATE_AMOUNTS = ("cpu_core_hour", "memory_gib_hour", "priority_base", "priority_step", "offpeak_discount", "spot_discount")
RATE_PLACES = 4
_RATE_QUANTUM = Decimal(1).scaleb(-RATE_PLACES)
_MICROSECONDS_PER_HOUR = Decimal(3_600_000_000)

# ISO 4217 minor units: how many decimals a final amount is rounded to.
MINOR_UNITS: dict[str, int] = {
    "USD": 2,
    "EUR": 2,
    "GBP": 2,
    "CHF": 2,
    "CNY": 2,
    "INR": 2,
    "JPY": 0,
    "KRW": 0,
}

_MIG_PROFILE = re.compile(r"^(?:nvidia\.com/)?(?:mig-)?(?P<slices>\d+)g\.(?P<mem>\d+)gb(?:\+me)?$")
_MIG_COMPUTE_SLICES = {1, 2, 3, 4, 7}


class Sharing(StrEnum):
    """How a job holds GPUs; decides the charged share."""

    EXCLUSIVE = "exclusive"
    FRACTION = "fraction"
    MIG = "mig"
    TIMESLICE = "timeslice"

    @classmethod
    def parse(cls, value: Sharing | str) -> Sharing:
        text = str(value).strip().lower().replace("_", "-")
        text = {"time-slicing": "timeslice", "timeslicing": "timeslice", "time-slice": "timeslice"}.get(
            text, text
        )
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(member.value for member in cls)
            raise ValueError(f"unknown GPU sharing mode {value!r}; expected one of {choices}") from None


# --------------------------------------------------------------------------- numbers


def to_decimal(value: Decimal | int | str, what: str) -> Decimal:
    """``value`` as a finite Decimal; floats are refused because they cannot hold money exactly."""
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError(f"{what} must be a Decimal, int or str, not {type(value).__name__} ({value!r})")
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int | str):
        try:
            number = Decimal(value)
        except ArithmeticError:
            raise ValueError(f"{what} is not a number: {value!r}") from None
    else:
        raise ValueError(f"{what} must be a Decimal, int or str, not {type(value).__name__}")
    if not number.is_finite():
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return number


def _non_negative(value: Decimal | int | str, what: str) -> Decimal:
    number = to_decimal(value, what)
    if number < 0:
        raise ValueError(f"{what} must not be negative, got {number}")
    return number


def _rate(value: Decimal | int | str, what: str) -> Decimal:
    """A stored rate: non-negative with at most 4 decimal places."""
    number = _non_negative(value, what)
    if number != number.quantize(_RATE_QUANTUM):
        raise ValueError(f"{what} {number} has more than {RATE_PLACES} decimal places")
    return number.quantize(_RATE_QUANTUM)


def _fraction(value: Decimal | int | str, what: str) -> Decimal:
    number = to_decimal(value, what)
    if not 0 <= number <= 1:
        raise ValueError(f"{what} must be between 0 and 1 (a share, 0.40 = 40 % off), got {number}")
    return number


def _positive_int(value: int, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, got {value}")
    return value


def quantize_rate(amount: Decimal) -> Decimal:
    """An hourly rate rounded (half up) to 4 decimal places."""
    return amount.quantize(_RATE_QUANTUM, rounding=ROUND_HALF_UP)


def minor_unit(currency: str) -> int:
    """Decimal places of the currency's minor unit (USD 2, JPY 0)."""
    try:
        return MINOR_UNITS[currency]
    except KeyError:
        known = ", ".join(sorted(MINOR_UNITS))
        raise ValueError(f"unknown currency {currency!r}; known: {known}") from None


def quantize_money(amount: Decimal, currency: str) -> Decimal:
    """A final amount rounded (half up) to the currency's minor unit."""
    return amount.quantize(Decimal(1).scaleb(-minor_unit(currency)), rounding=ROUND_HALF_UP)


def hours(duration: timedelta) -> Decimal:
    """A duration in hours (exact to the microsecond, then Decimal division)."""
    return Decimal(duration // timedelta(microseconds=1)) / _MICROSECONDS_PER_HOUR


# --------------------------------------------------------------------------- rates and tables


def _gpu_key(vendor: str, gpu_model: str) -> tuple[str, str]:
    return vendor.strip().casefold(), gpu_model.strip().casefold()


@dataclass(frozen=True)
class Rates:
    """One price list. ``gpu`` maps (vendor, gpu_model) to a price per GPU-hour.

    Priority multiplier = ``priority_base + priority x priority_step`` (default 1 + priority/100).
    Discounts are fractions taken off: 0.40 off-peak means the off-peak factor is 0.60.
    """

    currency: str
    gpu: Mapping[tuple[str, str], Decimal]
    cpu_core_hour: Decimal
    memory_gib_hour: Decimal
    priority_base: Decimal = Decimal(1)
    priority_step: Decimal = Decimal("0.01")
    offpeak_windows: tuple[Window, ...] = DEFAULT_OFFPEAK_WINDOWS
    offpeak_discount: Decimal = Decimal("0.40")
    spot_discount: Decimal = Decimal("0.60")
    # The zone the off-peak windows are read in ("": the platform's, passed as tz), so a CNY table
    # keeps its valley-electricity hours in Asia/Shanghai whatever the platform's zone.
    offpeak_time_zone: str = ""
    rules: tuple[PriceRule, ...] = DEFAULT_RULES  # the ordered price rules (billing.pricing.rules)
    # storage class -> price per GiB-month of the bytes used (a class not here is not billed)
    storage: Mapping[str, Decimal] = field(default_factory=dict)

    def windows_zone(self, platform_tz: tzinfo | str) -> tzinfo | str:
        """The zone this table's off-peak windows are read in."""
        return as_zone(self.offpeak_time_zone) if self.offpeak_time_zone else platform_tz

    def __post_init__(self) -> None:
        minor_unit(self.currency)
        if self.offpeak_time_zone:
            as_zone(self.offpeak_time_zone)  # an unknown zone is refused here
        gpu: dict[tuple[str, str], Decimal] = {}
        for key, price in dict(self.gpu).items():
            if not (
                isinstance(key, tuple)
                and len(key) == 2
                and all(isinstance(part, str) and part.strip() for part in key)
            ):
                raise ValueError(f"GPU rate key {key!r} must be a (vendor, gpu_model) pair of names")
            gpu[(key[0].strip().lower(), key[1].strip())] = _rate(price, f"GPU rate for {key[0]} {key[1]}")
        seen: set[tuple[str, str]] = set()
        for vendor, model in gpu:
            if _gpu_key(vendor, model) in seen:
                raise ValueError(f"GPU rate for {vendor} {model} is given twice")
            seen.add(_gpu_key(vendor, model))
        set_ = object.__setattr__  # frozen dataclass: normalise fields once, here
        set_(self, "gpu", gpu)
        set_(self, "cpu_core_hour", _rate(self.cpu_core_hour, "CPU rate per core-hour"))
        set_(self, "memory_gib_hour", _rate(self.memory_gib_hour, "memory rate per GiB-hour"))
        set_(self, "priority_base", _non_negative(self.priority_base, "priority multiplier base"))
        set_(self, "priority_step", _non_negative(self.priority_step, "priority multiplier step"))
        set_(self, "offpeak_windows", validate_windows(self.offpeak_windows))
        set_(self, "offpeak_discount", _fraction(self.offpeak_discount, "off-peak discount"))
        set_(self, "spot_discount", _fraction(self.spot_discount, "spot discount"))
        set_(self, "rules", tuple(self.rules))
        set_(self, "storage", {str(name).strip(): _rate(price, f"storage rate for class {name}")
                               for name, price in dict(self.storage).items()})

    def storage_rate(self, storage_class: str) -> Decimal | None:
        """Price per GiB-month of the class's used bytes; None: the class is not priced."""
        return self.storage.get(storage_class.strip())

    def gpu_rate(self, vendor: str, gpu_model: str) -> Decimal:
        """Price per GPU-hour for the model (names compared case-insensitively)."""
        wanted = _gpu_key(vendor, gpu_model)
        for (known_vendor, known_model), price in self.gpu.items():
            if _gpu_key(known_vendor, known_model) == wanted:
                return price
        known = ", ".join(f"{v} {m}" for v, m in self.gpu) or "none"
        raise ValueError(f"no GPU rate for {vendor} {gpu_model} in this price table (priced: {known})")

    def priority_multiplier(self, priority: int) -> Decimal:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        if priority < 0:
            raise ValueError(f"priority must not be negative, got {priority}")
        return self.priority_base + self.priority_step * priority

    @property
    def offpeak_factor(self) -> Decimal:
        return 1 - self.offpeak_discount

    @property
    def spot_factor(self) -> Decimal:
        return 1 - self.spot_discount


@dataclass(frozen=True)
class PriceTable:
    """A version of the price list, in force from ``effective_from`` until the next one."""

    effective_from: datetime
    rates: Rates
    name: str = ""

    def __post_init__(self) -> None:
        require_aware(self.effective_from, f"price table {self.name!r}: effective_from")


def table_in_force(tables: Iterable[PriceTable], at: datetime) -> PriceTable:
    """The table with the latest ``effective_from`` not after ``at``."""
    require_aware(at, "price time")
    instant = at.astimezone(UTC)  # compare instants, never wall clocks
    current: PriceTable | None = None
    for table in tables:
        since = table.effective_from.astimezone(UTC)
        if since <= instant and (current is None or since > current.effective_from.astimezone(UTC)):
            current = table
    if current is None:
        raise ValueError(f"no price table is in force at {at.isoformat()}")
    return current


# --------------------------------------------------------------------------- what is charged


def mig_compute_slices(profile: str) -> int:
    """Compute slices of a MIG profile: ``3g.40gb`` (or ``nvidia.com/mig-3g.40gb``) -> 3."""
    match = _MIG_PROFILE.match(profile.strip().lower()) if isinstance(profile, str) else None
    if match is None or int(match["slices"]) not in _MIG_COMPUTE_SLICES:
        raise ValueError(f"unknown MIG profile {profile!r}; expected e.g. 1g.10gb, 3g.40gb, 7g.80gb")
    return int(match["slices"])


def charged_gpu_share(
    sharing: Sharing | str,
    *,
    gpu_milli: int | None = None,
    num_gpus: int | None = None,
    gpu_mem_mib: int | None = None,
    gpu_total_mem_mib: int | None = None,
    mig_profile: str | None = None,
    timeslice_replicas: int | None = None,
) -> Decimal:
    """GPUs charged for what a replica holds (nobody else can use it).

    exclusive: ``num_gpus`` (0 for a CPU-only role); fraction: max(gpu_milli / 1000, gpu_mem_mib / gpu_total_mem_mib);
    MIG: profile compute slices / 7; time-slicing: 1 / timeslice_replicas. For the shared modes
    ``num_gpus`` (default 1) counts devices / MIG instances / time slices held.
    """
    mode = Sharing.parse(sharing)
    if mode is Sharing.EXCLUSIVE:
        if num_gpus is None:
            raise ValueError("exclusive sharing needs num_gpus")
        return Decimal(_positive_int(num_gpus, "num_gpus", minimum=0))
    count = Decimal(_positive_int(1 if num_gpus is None else num_gpus, "num_gpus"))
    if mode is Sharing.MIG:
        if mig_profile is None:
            raise ValueError("MIG sharing needs mig_profile (e.g. 3g.40gb)")
        return count * Decimal(mig_compute_slices(mig_profile)) / MIG_SLICES_PER_GPU
    if mode is Sharing.TIMESLICE:
        if timeslice_replicas is None:
            raise ValueError("time-slicing needs timeslice_replicas (the pool's replicas per GPU)")
        return count / _positive_int(timeslice_replicas, "timeslice_replicas")
    # fraction
    if gpu_milli is None and gpu_mem_mib is None:
        raise ValueError("fraction sharing needs gpu_milli or gpu_mem_mib")
    compute = Decimal(0)
    if gpu_milli is not None:
        compute = Decimal(_positive_int(gpu_milli, "gpu_milli")) / 1000
        if compute > 1:
            raise ValueError(f"gpu_milli {gpu_milli} is more than one GPU; use exclusive sharing")
    memory = Decimal(0)
    if gpu_mem_mib is not None:
        if gpu_total_mem_mib is None:
            raise ValueError("gpu_mem_mib needs gpu_total_mem_mib (the GPU's memory) to compute the share")
        memory = Decimal(_positive_int(gpu_mem_mib, "gpu_mem_mib")) / _positive_int(
            gpu_total_mem_mib, "gpu_total_mem_mib"
        )
        if memory > 1:
            raise ValueError(f"gpu_mem_mib {gpu_mem_mib} is more than the GPU's {gpu_total_mem_mib} MiB")
    return count * max(compute, memory)


@dataclass(frozen=True)
class Allocation:
    """What one replica holds: a GPU share of a model, CPU cores and memory (GiB)."""

    share: Decimal
    vendor: str | None = None
    gpu_model: str | None = None
    cpu_cores: Decimal = Decimal(0)
    memory_gib: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        share = _non_negative(self.share, "GPU share")
        if share > 0 and not (self.vendor and self.gpu_model):
            raise ValueError("an allocation with a GPU share needs vendor and gpu_model")
        object.__setattr__(self, "share", share)
        object.__setattr__(self, "cpu_cores", _non_negative(self.cpu_cores, "CPU cores"))
        object.__setattr__(self, "memory_gib", _non_negative(self.memory_gib, "memory GiB"))

    @classmethod
    def from_units(
        cls, share: Decimal, vendor: str | None, gpu_model: str | None, *, cpu_milli: int, mem_mib: int
    ) -> Allocation:
        """From the scheduler's units: milli-CPU and MiB (both convert to exact decimals)."""
        cpu = Decimal(_positive_int(cpu_milli, "cpu_milli", minimum=0)) / 1000
        memory = Decimal(_positive_int(mem_mib, "mem_mib", minimum=0)) / 1024
        return cls(share=share, vendor=vendor, gpu_model=gpu_model, cpu_cores=cpu, memory_gib=memory)


@dataclass(frozen=True)
class HourlyPrice:
    """One replica's price per hour (4 places) and the rules' adjustments behind it, in order."""

    amount: Decimal
    adjustments: tuple[Adjustment, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(adjustment.code for adjustment in self.adjustments)


def price_per_hour(
    rates: Rates, option: PricedOption, window: PriceWindow | None = None, workspace: PricedWorkspace | None = None
) -> HourlyPrice:
    """The fold of the table's price rules over ``option`` in ``window``, rounded to 4 places."""
    amount, adjustments = fold(rates.rules, rates, option, window or PriceWindow(), workspace or PricedWorkspace())
    return HourlyPrice(quantize_rate(amount), adjustments)


def hourly_price(
    rates: Rates,
    allocation: Allocation,
    *,
    priority: int = 0,
    offpeak: bool = False,
    spot: bool = False,
    window: PriceWindow | None = None,
    workspace: PricedWorkspace | None = None,
) -> Decimal:
    """Price per hour of one replica, rounded to 4 decimal places (``window``: the time priced;
    none: a rate not tied to a time, peak or off-peak as ``offpeak`` says)."""
    option = PricedOption(allocation, priority=priority, spot=spot)
    return price_per_hour(rates, option, window or PriceWindow(offpeak=offpeak), workspace).amount


def _timed(rates: Rates) -> bool:
    """Whether a rule of the table looks at the time (more than peak or off-peak)."""
    return any(rule.timed for rule in rates.rules)


def _priced_parts(
    rates: Rates, option: PricedOption, start: datetime, end: datetime, tz: tzinfo | str, workspace: PricedWorkspace,
    untimed: dict[bool, Decimal] | None = None,
) -> list[tuple[PriceWindow, Decimal]]:
    """[start, end) cut at off-peak boundaries and where a rule's answer changes, each piece with its rate.
    ``untimed``: the peak and off-peak rates when already known; kept while no rule looks at the time."""
    timed = _timed(rates)
    known = {} if timed else dict(untimed or {})
    parts = []
    for part_start, part_end, is_off in _offpeak_parts(start, end, rates.offpeak_windows, rates.windows_zone(tz)):
        cuts = cut_points(rates.rules, part_start, part_end, workspace) if timed else []
        bounds = [part_start, *cuts, part_end]
        for piece_start, piece_end in zip(bounds, bounds[1:], strict=False):
            window = PriceWindow(piece_start, piece_end, is_off)
            rate = known.get(is_off)
            if rate is None:
                rate = price_per_hour(rates, option, window, workspace).amount
                if not timed:
                    known[is_off] = rate
            parts.append((window, rate))
    return parts


# --------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Estimate:
    """A quote for ``replicas`` replicas running ``peak + offpeak`` from a start time."""

    currency: str
    price_per_hour: Decimal  # one replica, peak
    price_per_hour_offpeak: Decimal  # one replica, off-peak
    peak: timedelta
    offpeak: timedelta
    replicas: int
    amount: Decimal  # all replicas, not rounded: sum these across roles, then quantize_money once
    total: Decimal  # amount rounded to the currency's minor unit


def estimate(
    rates: Rates,
    allocation: Allocation,
    *,
    start: datetime,
    duration: timedelta,
    tz: tzinfo | str,
    priority: int = 0,
    spot: bool = False,
    replicas: int = 1,
    workspace: PricedWorkspace | None = None,
    by_deadline: bool = False,
    deadline_discount: Decimal | None = None,
) -> Estimate:
    """Expected cost: peak hours x peak rate + off-peak hours x off-peak rate, times replicas.

    ``tz`` is the platform's time zone, in which the off-peak windows are read (and the workspace's
    calendar, unless ``workspace`` gives its own). Price with the table in force when the quote is
    made: ``estimate(table_in_force(tables, now).rates, ...)``. Rates are those at ``start``.
    """
    require_aware(start, "start")
    require_duration(duration)
    _positive_int(replicas, "replicas")
    workspace = workspace or PricedWorkspace(tz)
    option = PricedOption(allocation, priority=priority, spot=spot, by_deadline=by_deadline,
                          deadline_discount=deadline_discount)
    begin = start.astimezone(UTC)
    peak_rate = price_per_hour(rates, option, PriceWindow(begin, begin), workspace).amount
    offpeak_rate = price_per_hour(rates, option, PriceWindow(begin, begin, offpeak=True), workspace).amount
    if not _timed(rates):  # two rates: peak and off-peak hours, each priced once
        split = split_hours(begin, duration, rates.offpeak_windows, rates.windows_zone(tz))
        amount = replicas * (hours(split.peak) * peak_rate + hours(split.offpeak) * offpeak_rate)
        return Estimate(rates.currency, peak_rate, offpeak_rate, split.peak, split.offpeak, replicas, amount,
                        quantize_money(amount, rates.currency))
    parts = _priced_parts(rates, option, begin, begin + duration, tz, workspace)
    # time is summed per rate before it is priced, peak first: hours x rate once per rate
    held: dict[tuple[bool, Decimal], timedelta] = {(False, peak_rate): timedelta(0), (True, offpeak_rate): timedelta(0)}
    for window, rate in parts:
        key = (window.offpeak, rate)
        held[key] = held.get(key, timedelta(0)) + (window.end - window.start)
    ordered = sorted(held.items(), key=lambda item: item[0][0])  # stable: peak rates, then off-peak ones
    amount = replicas * sum((hours(time) * rate for (_, rate), time in ordered), Decimal(0))
    peak = sum((time for (is_off, _), time in held.items() if not is_off), timedelta(0))
    return Estimate(
        currency=rates.currency,
        price_per_hour=peak_rate,
        price_per_hour_offpeak=offpeak_rate,
        peak=peak,
        offpeak=duration - peak,
        replicas=replicas,
        amount=amount,
        total=quantize_money(amount, rates.currency),
    )


# --------------------------------------------------------------------------- metering


def _offpeak_parts(
    start: datetime, end: datetime, windows: Sequence[Window], tz: tzinfo | str
) -> list[tuple[datetime, datetime, bool]]:
    """[start, end) cut at off-peak boundaries: (start, end, is_offpeak) pieces in order."""
    parts: list[tuple[datetime, datetime, bool]] = []
    cursor = start
    for off_start, off_end in offpeak_intervals(start, end, windows, tz):
        if off_start > cursor:
            parts.append((cursor, off_start, False))
        parts.append((off_start, off_end, True))
        cursor = off_end
    if cursor < end:
        parts.append((cursor, end, False))
    return parts


@dataclass(frozen=True)
class HeldInterval:
    """A replica held ``allocation`` from ``start`` to ``end`` (on a spot node or not)."""

    start: datetime
    end: datetime
    allocation: Allocation
    spot: bool = False
    by_deadline: bool = False  # priced "by the deadline" (rules.ByDeadline), with its pool's discount
    deadline_discount: Decimal | None = None

    def __post_init__(self) -> None:
        require_aware(self.start, "interval start")
        require_aware(self.end, "interval end")
        if self.end < self.start:
            raise ValueError(
                f"interval end {self.end.isoformat()} is before its start {self.start.isoformat()}"
            )


@dataclass(frozen=True)
class CostSegment:
    """A piece of a held interval with one table, one off-peak state: priced at one rate."""

    start: datetime
    end: datetime
    table: PriceTable
    offpeak: bool
    spot: bool
    allocation: Allocation
    price_per_hour: Decimal
    amount: Decimal  # not rounded: segments are summed first, rounded once

    @property
    def duration(self) -> timedelta:
        return self.end - self.start


@dataclass(frozen=True)
class MeteredCost:
    currency: str
    total: Decimal  # rounded to the currency's minor unit
    segments: tuple[CostSegment, ...] = field(default=())


def cost_for_intervals(
    intervals: Iterable[HeldInterval], tables: Sequence[PriceTable], *, priority: int, tz: tzinfo | str
) -> MeteredCost:
    """Final cost of held intervals: each piece at the table in force then, split at off-peak
    boundaries (that table's windows, read in ``tz``), at price-table changes and where one of the
    table's price rules changes its answer."""
    tables = list(tables)
    workspace = PricedWorkspace(tz)
    segments: list[CostSegment] = []
    for interval in intervals:
        start, end = interval.start.astimezone(UTC), interval.end.astimezone(UTC)
        changes = sorted({t.effective_from.astimezone(UTC) for t in tables if start < t.effective_from < end})
        bounds = [start, *changes, end]
        for piece_start, piece_end in zip(bounds, bounds[1:], strict=False):
            if piece_end <= piece_start:
                continue
            table = table_in_force(tables, piece_start)
            rates = table.rates
            option = PricedOption(interval.allocation, priority=priority, spot=interval.spot,
                                  by_deadline=interval.by_deadline, deadline_discount=interval.deadline_discount)
            for window, rate in _priced_parts(rates, option, piece_start, piece_end, tz, workspace):
                segments.append(
                    CostSegment(
                        start=window.start,
                        end=window.end,
                        table=table,
                        offpeak=window.offpeak,
                        spot=interval.spot,
                        allocation=interval.allocation,
                        price_per_hour=rate,
                        amount=hours(window.end - window.start) * rate,
                    )
                )
    currencies = {segment.table.rates.currency for segment in segments}
    if len(currencies) > 1:
        raise ValueError(
            f"held intervals span price tables in different currencies: {', '.join(sorted(currencies))}"
        )
    if currencies:
        currency = currencies.pop()
    elif tables:
        currency = tables[0].rates.currency
    else:
        raise ValueError("no price tables given")
    total = sum((segment.amount for segment in segments), Decimal(0))
    return MeteredCost(currency=currency, total=quantize_money(total, currency), segments=tuple(segments))


@dataclass(frozen=True)
class StorageSegment:
    """Used GiB kept over a piece of time under one price table: GiB-hours and their price."""

    start: datetime
    end: datetime
    table: PriceTable
    gib_hours: Decimal
    amount: Decimal  # not rounded: the ledger line rounds once
    adjustments: tuple[Adjustment, ...] = ()


def storage_cost(
    storage: PricedStorage, start: datetime, end: datetime, tables: Sequence[PriceTable], *, tz: tzinfo | str
) -> tuple[StorageSegment, ...]:
    """The used GiB of ``storage`` kept from ``start`` to ``end``, cut where a price table takes over, each
    piece priced by its table's rules (``fold_storage``). A piece whose table does not price the class is
    left out: it is not billed."""
    require_aware(start, "storage start")
    require_aware(end, "storage end")
    tables = list(tables)
    workspace = PricedWorkspace(tz)
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    changes = sorted({t.effective_from.astimezone(UTC) for t in tables if start < t.effective_from < end})
    bounds = [start, *changes, end]
    segments: list[StorageSegment] = []
    for piece_start, piece_end in zip(bounds, bounds[1:], strict=False):
        if piece_end <= piece_start:
            continue
        table = table_in_force(tables, piece_start)
        priced = fold_storage(table.rates.rules, table.rates, storage, PriceWindow(piece_start, piece_end), workspace)
        if priced is None:
            continue
        per_hour, adjustments = priced
        held = hours(piece_end - piece_start)
        segments.append(StorageSegment(piece_start, piece_end, table, storage.used_gib * held, per_hour * held,
                                       adjustments))
    return tuple(segments)
