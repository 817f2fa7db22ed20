"""Quotes: every way a job spec can run on the node pools, priced before the tenant submits.

Pure module (no Django). Prices come from :mod:`billing.pricing` (never re-derived here); this
module decides *which* options exist and describes what each one gives up.

Options
    One option per (pool, sharing mode, when). A multi-role job runs every GPU role in the same
    pool and the same sharing mode; CPU-only roles (``num_gpus == 0``) are priced for CPU and
    memory only, with the same time-of-day and spot factors as the pool the job lands in.
    Hard filters, per role: ``nodePool``, ``gpuModel`` and vendor (``nvidia`` / ``amd`` /
    ``any``); a pool that fails one for any role gives no option. Nor does a pool whose GPU model
    the price table has no rate for: a workspace is quoted (and so runs) only on pools its
    currency's table prices. The spec's own sharing is the preferred choice (``matches_spec``
    True); alternative modes are extra options flagged ``matches_spec`` False. When the roles ask
    different modes, the spec's own combination is one more option, labelled e.g.
    ``exclusive+fraction``.

Which alternative modes are offered (the honesty rule)
    An alternative must give each role at least the compute and GPU memory it asked for, counting
    only what the mode *guarantees*:

    * exclusive: whole GPUs, always enough (a shared ask becomes one whole GPU; pays for more);
    * fraction: ``ceil(ask, 0.01 GPU)`` of one GPU with the asked memory reserved; never for an
      exclusive or time-slice ask (a fraction is at most 0.99 of a GPU);
    * MIG: the smallest profile of the pool's layout with ``slices / 7 >= ask`` and at least the
      asked memory; so an exclusive 1-GPU ask fits only a 7g instance, which is the whole GPU
      with hardware isolation and costs the same;
    * time-slicing: a slot guarantees ``1 / replicas-per-GPU`` of the compute and no memory
      isolation; it is offered only when that share covers the ask (a 0.25 ask on a 4-way pool)
      and the card has the asked memory, and the trade-offs say memory is not isolated.

    Asks spanning several GPUs per replica stay exclusive (the shared modes hold one device).

When
    ``now`` starts at ``now``; ``off-peak`` starts when the next off-peak window opens. If ``now``
    is already off-peak there is only the ``now`` option. ReduceCost jobs get only off-peak
    options and spot options (they run only in off-peak windows or on spot capacity), with no
    completion promise.

Money
    ``price_per_hour`` / ``price_per_hour_offpeak``: the whole job at MinReplicas (every role at
    its minimum), peak and off-peak, 4 decimal places, spot factor included;
    ``price_per_hour_max`` / ``price_per_hour_max_offpeak`` the same at MaxReplicas (what an inference
    service costs per hour scaled out; at its minimum, 0 when it scales to zero). ``estimate_low`` /
    ``estimate_high``: every role at its MinReplicas / MaxReplicas for the expected duration from
    ``starts_at``, split into peak and off-peak hours, summed unrounded and rounded once to the
    currency's minor unit. Price with the table in force when quoting (see :func:`quote_at`).

Per option, for the stated duration (``Quote.expected_duration_hours``)
    ``total`` is ``estimate_low`` (every role at MinReplicas); ``price_per_gpu_hour`` is that total
    over the GPUs charged at MinReplicas times the hours (CPU and memory included, off-peak hours at
    their rate); ``saving`` / ``saving_percent`` compare the total with the same roles, pool, start
    and duration on exclusive whole GPUs (each replica's shared device becomes one whole GPU), both
    unrounded and rounded once. ``expected_start``: the instant it is expected to start (``now``
    when it fits free capacity now), None when it waits in the queue with no estimate;
    ``billing/starts.py`` sets it from the cluster's state (:func:`with_expected_starts`). One
    option is ``cheapest`` and one ``earliest`` (the soonest start, then the cheapest).

Capacity
    ``PoolOffer.free_milli_now`` (None: unknown, assumed enough) decides ``can_start_now`` of a
    ``now`` option; ``PoolOffer.total_gpus`` (None: unknown) drops a pool whose GPUs can never
    hold the gang at MinReplicas. Both compare milli-GPU (charged share x 1000, rounded up, per
    replica), an approximation for MIG layouts (which instances exist is not checked).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, tzinfo
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from typing import Any

from billing.pricing import (
    MIG_SLICES_PER_GPU,
    Allocation,
    PriceTable,
    Rates,
    charged_gpu_share,
    estimate,
    mig_compute_slices,
    minor_unit,
    quantize_money,
    table_in_force,
)
from scheduling import kinds
from scheduling.api import (
    MILLI_PER_GPU,
    DomainError,
    JobSpec,
    PoolTraits,
    RoleSpec,
    check_pool_identity,
    check_pools,
    is_offpeak,
    level_name,
    mig_memory_mib,
    mig_slices_milli,
    next_offpeak_start,
    require_aware,
    role_request,
)

MODES = ("exclusive", "fraction", "mig", "timeslice")  # canonical order of options per pool
CPU_ONLY = "none"  # the sharing label of a job without GPU roles
NOW, OFF_PEAK, DEADLINE = "now", "off-peak", "deadline"
DEFAULT_DURATION_S = 2 * 3600  # a quote assumes 2 h when neither the request nor the spec says
DURATION_SOURCES = ("request", "spec", "default")
VENDORS = ("nvidia", "amd")
_MIG_MEMORY = re.compile(r"^[1-7]g\.(\d{1,3})gb$")
_RATE_PLACES = Decimal("0.0001")
_SHARE_PLACES = Decimal("0.0001")
_LOSS_PLACES = Decimal("0.01")  # an expected loss of GPU-hours: an estimate, not a record
# a "now" option that has to wait: for GPUs, for its queue's quota, for the workspace's budget
_WAIT_CODES = ("may_wait_for_capacity", "no_room_now", "queue_quota_full", "queue_limit_full", "budget_blocks")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PoolOffer:
    """What one node pool offers a quote: its GPUs, sharing modes, class and free capacity."""

    name: str
    vendor: str  # nvidia | amd
    gpu_model: str
    gpu_memory_mib: int
    gpus_per_node: int
    sharing_modes: frozenset[str] = frozenset({"exclusive", "fraction"})
    mig_profiles: frozenset[str] = frozenset()  # the profiles one GPU's layout offers
    timeslice_replicas: int = 1  # slots per GPU when the pool time-slices
    spot: bool = False
    free_milli_now: int | None = None  # free GPU capacity now (milli-GPU); None = unknown
    total_gpus: int | None = None  # all GPUs of the pool; None = unknown
    # topology levels (node label keys, outermost first) with the GPUs of each level's largest domain
    topology: tuple[tuple[str, int], ...] = ()
    deadline_discount: Decimal | None = None  # work "by the deadline"; None: the table's off-peak discount

    def __post_init__(self) -> None:
        where = f"pool offer {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("pool offer: name is empty")
        if self.vendor not in VENDORS:
            raise ValueError(f"{where}: vendor {self.vendor!r} is not one of {', '.join(VENDORS)}")
        if not isinstance(self.gpu_model, str) or not self.gpu_model.strip():
            raise ValueError(f"{where}: gpu_model is empty")
        for attr in ("gpu_memory_mib", "timeslice_replicas"):
            _require_int(getattr(self, attr), f"{where}: {attr}", minimum=1)
        # a pool without GPU nodes yet offers nothing (quote() says so) but is a valid offer
        _require_int(self.gpus_per_node, f"{where}: gpus_per_node", minimum=0 if self.total_gpus == 0 else 1)
        modes = frozenset(self.sharing_modes)
        if not modes or not modes <= set(MODES):
            raise ValueError(f"{where}: sharing_modes {sorted(modes)} must be a non-empty subset of {MODES}")
        profiles = frozenset(self.mig_profiles)
        if "mig" in modes:
            if self.vendor != "nvidia":
                raise ValueError(f"{where}: MIG is an NVIDIA feature, not {self.vendor}")
            if not profiles:
                raise ValueError(f"{where}: a MIG pool needs mig_profiles (e.g. 3g.40gb)")
        for profile in profiles:
            mig_compute_slices(profile)  # raises on a malformed profile
            if not _MIG_MEMORY.match(profile):
                raise ValueError(f"{where}: MIG profile {profile!r} must look like 3g.40gb")
        if self.free_milli_now is not None:
            _require_int(self.free_milli_now, f"{where}: free_milli_now", minimum=0)
        if self.total_gpus is not None:
            _require_int(self.total_gpus, f"{where}: total_gpus", minimum=0)
        object.__setattr__(self, "sharing_modes", modes)
        object.__setattr__(self, "mig_profiles", profiles)

    @property
    def is_empty(self) -> bool:
        """No GPU node has joined the pool yet."""
        return self.total_gpus == 0

    @property
    def traits(self) -> PoolTraits:
        return PoolTraits(self.name, self.vendor, self.gpu_model, self.gpu_memory_mib, self.sharing_modes,
                          self.mig_profiles, self.gpus_per_node)


def _require_int(value: Any, what: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an integer of at least {minimum}, got {value!r}")


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True, eq=False)
class Note:
    """A trade-off or a pool's refusal: a stable code and its figures (JSON values). This module words
    none: the catalogue (billing/quote_texts.py) does, in English for `text` (installed at start-up,
    see `render_notes_with`) and in the reader's language for pages and the API's *_text fields."""

    code: str
    params: dict[str, Any]

    @property
    def text(self) -> str:
        return _render_note(self.code, self.params)

    @property
    def tag(self) -> str:
        """Its short name for a table cell ("shared GPU", "may queue")."""
        return _render_tag(self.code)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "params": self.params}


def _note(code: str, **params: Any) -> Note:
    return Note(code, params)


def _code_and_figures(code: str, params: dict[str, Any] | None = None) -> str:
    """A note as it reads with no catalogue installed (this module on its own)."""
    return code if params is None else f"{code} {json.dumps(params, sort_keys=True, default=str)}"


_render_note: Callable[[str, dict[str, Any]], str] = _code_and_figures
_render_tag: Callable[[str], str] = _code_and_figures


def render_notes_with(note: Callable[[str, dict[str, Any]], str], tag: Callable[[str], str]) -> None:
    """Let `note(code, params)` word trade-offs and refusals and `tag(code)` name a trade-off: billing
    installs the catalogue's English at start-up."""
    global _render_note, _render_tag
    _render_note, _render_tag = note, tag


@dataclass(frozen=True)
class RoleQuote:
    """How one role runs in an option, and its per-replica rates."""

    name: str
    sharing: str  # exclusive | fraction | mig | timeslice | none (CPU only)
    num_gpus: int  # devices / instances / slots per replica (0 for a CPU-only role)
    gpu_milli: int  # compute per device asked (fraction: the reserved share)
    gpu_mem_mib: int | None  # fraction: reserved GPU memory; MIG: the profile's memory
    mig_profile: str | None
    gpu_share: Decimal  # GPUs charged per replica
    min_replicas: int
    max_replicas: int
    price_per_hour: Decimal  # one replica, peak
    price_per_hour_offpeak: Decimal  # one replica, off-peak

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sharing": self.sharing,
            "num_gpus": self.num_gpus,
            "gpu_milli": self.gpu_milli,
            "gpu_mem_mib": self.gpu_mem_mib,
            "mig_profile": self.mig_profile,
            "gpu_share": _fmt(self.gpu_share.quantize(_SHARE_PLACES)),
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "price_per_hour": _fmt(self.price_per_hour.quantize(_RATE_PLACES)),
            "price_per_hour_offpeak": _fmt(self.price_per_hour_offpeak.quantize(_RATE_PLACES)),
        }


@dataclass(frozen=True)
class ExpectedLoss:
    """What evictions are expected to cost an evictable option at its queue's recent eviction rate."""

    gpu_hours: Decimal  # of work lost, unrounded
    cost: Decimal  # at the option's price per GPU-hour, unrounded
    evictions_per_gpu_hour: Decimal  # the queue's, over EVICTION_RATE_DAYS

    def to_json(self, currency: str) -> dict[str, str]:
        return {"gpu_hours": _fmt(self.gpu_hours.quantize(_LOSS_PLACES)),
                "cost": _fmt(quantize_money(self.cost, currency)),
                "evictions_per_gpu_hour": _fmt(self.evictions_per_gpu_hour.quantize(_RATE_PLACES))}


@dataclass(frozen=True)
class QuoteOption:
    id: str  # "<pool>.<sharing>.<when>", e.g. "a100-spot.fraction.now"
    sharing: str
    vendor: str
    gpu_model: str
    pool: str
    spot: bool
    when: str  # now | off-peak
    starts_at: datetime
    price_per_hour: Decimal  # whole job at MinReplicas, peak
    price_per_hour_offpeak: Decimal  # whole job at MinReplicas, off-peak
    estimate_low: Decimal  # MinReplicas for the expected duration, rounded once
    estimate_high: Decimal  # MaxReplicas
    cheapest: bool
    can_start_now: bool
    matches_spec: bool
    tradeoffs: tuple[str, ...]
    roles: tuple[RoleQuote, ...]
    currency: str
    # unrounded amounts: the cheapest option is decided on these, not on cents
    amount_low: Decimal = field(repr=False, compare=False, default=Decimal(0))
    amount_high: Decimal = field(repr=False, compare=False, default=Decimal(0))
    gpus: Decimal = Decimal(0)  # GPUs charged with every role at MinReplicas
    hours: Decimal = Decimal(0)  # the duration the totals are for
    exclusive_amount: Decimal = field(repr=False, compare=False, default=Decimal(0))  # on whole GPUs, unrounded
    expected_start: datetime | None = None  # None: waits in the queue, no estimate
    earliest: bool = False
    price_per_hour_max: Decimal = Decimal(0)  # whole job at MaxReplicas, peak
    price_per_hour_max_offpeak: Decimal = Decimal(0)  # whole job at MaxReplicas, off-peak
    tradeoff_notes: tuple[Note, ...] = field(default=(), compare=False)  # tradeoffs[i] is tradeoff_notes[i].text
    # where the gang goes: ("required" | "preferred", level), the job's `topology`; None: anywhere
    topology: tuple[str, str] | None = None
    expected_loss: ExpectedLoss | None = None  # evictable options with a queue history only (with_expected_loss)
    complete_by: datetime | None = None  # a "deadline" option: when the platform promises it done
    # the preemptible variant of a non-preemptible spec's option its queue's quota holds: submitted as preemptible
    as_preemptible: bool = False
    starts_offpeak: bool = False  # its first hour is at the off-peak rate (an off-peak start, or "now" inside a window)

    @property
    def starts_now(self) -> bool:
        return self.expected_start is not None and self.expected_start <= self.starts_at and self.when == NOW

    @property
    def price_per_gpu_hour(self) -> Decimal | None:
        if self.gpus <= 0 or self.hours <= 0:
            return None
        return self.amount_low / (self.gpus * self.hours)

    @property
    def saving(self) -> Decimal:
        return self.exclusive_amount - self.amount_low

    @property
    def saving_percent(self) -> Decimal | None:
        if self.exclusive_amount <= 0:
            return None
        return self.saving * 100 / self.exclusive_amount

    def to_json(self) -> dict[str, Any]:
        places = Decimal(1).scaleb(-minor_unit(self.currency))
        per_gpu_hour = self.price_per_gpu_hour
        percent = self.saving_percent
        if self.expected_start is None:
            expected_start = None
        else:
            expected_start = NOW if self.starts_now else self.expected_start.isoformat()
        return {
            "id": self.id,
            "sharing": self.sharing,
            "vendor": self.vendor,
            "gpu_model": self.gpu_model,
            "pool": self.pool,
            "spot": self.spot,
            "when": self.when,
            "starts_at": self.starts_at.isoformat(),
            "starts_offpeak": self.starts_offpeak,
            "currency": self.currency,
            "price_per_hour": _fmt(self.price_per_hour.quantize(_RATE_PLACES)),
            "price_per_hour_offpeak": _fmt(self.price_per_hour_offpeak.quantize(_RATE_PLACES)),
            "price_per_hour_max": _fmt(self.price_per_hour_max.quantize(_RATE_PLACES)),
            "price_per_hour_max_offpeak": _fmt(self.price_per_hour_max_offpeak.quantize(_RATE_PLACES)),
            "estimate_low": _fmt(self.estimate_low.quantize(places)),
            "estimate_high": _fmt(self.estimate_high.quantize(places)),
            "cheapest": self.cheapest,
            "can_start_now": self.can_start_now,
            "matches_spec": self.matches_spec,
            "tradeoffs": list(self.tradeoffs),
            "roles": [role.to_json() for role in self.roles],
            "duration_hours": _hours_text(self.hours),
            "total": _fmt(quantize_money(self.amount_low, self.currency)),
            "gpus": _fmt(self.gpus.quantize(_SHARE_PLACES).normalize()),
            "price_per_gpu_hour": None if per_gpu_hour is None else _fmt(per_gpu_hour.quantize(_RATE_PLACES)),
            "expected_start": expected_start,
            "starts_now": self.starts_now,
            "exclusive_total": _fmt(quantize_money(self.exclusive_amount, self.currency)),
            "saving": _fmt(quantize_money(self.saving, self.currency)),
            "saving_percent": None if percent is None else _fmt(percent.quantize(Decimal("0.1"))),
            "earliest": self.earliest,
            "tradeoff_tags": [note.tag for note in self.tradeoff_notes],  # one per trade-off
            "tradeoff_codes": [note.to_json() for note in self.tradeoff_notes],  # one per trade-off
            "topology": {self.topology[0]: self.topology[1]} if self.topology else {},
            "as_preemptible": self.as_preemptible,
            # only where a figure stands behind it: never a made-up one for a queue without history
            **({"expected_loss": self.expected_loss.to_json(self.currency)} if self.expected_loss else {}),
            **({"complete_by": self.complete_by.isoformat(), "finish": self.finish_range()}
               if self.complete_by is not None else {}),
        }

    def finish_range(self) -> dict[str, str | None]:
        """A "deadline" option's finish: from its expected start plus its run (null: no expected start) to the
        deadline it is promised by."""
        earliest = None
        if self.expected_start is not None and self.complete_by is not None:
            earliest = min(self.expected_start + timedelta(hours=float(self.hours)), self.complete_by).isoformat()
        return {"earliest": earliest, "latest": self.complete_by.isoformat() if self.complete_by else None}


@dataclass(frozen=True)
class Quote:
    currency: str
    expected_duration_hours: Decimal
    options: tuple[QuoteOption, ...]  # cheapest first (by estimate_low, then estimate_high, then id)
    quoted_at: datetime
    unavailable: tuple[str, ...] = ()  # "pool: why it gives no option", for pools left out
    duration_source: str = "spec"  # request | spec | default: who chose expected_duration_hours
    refusals: tuple[Note, ...] = field(default=(), compare=False)  # unavailable[i] is its pool's refusals[i]
    schedule: ScheduleMonth | None = None  # a spec with `schedule:`: what a month of its runs costs

    @property
    def cheapest(self) -> QuoteOption:
        return next(option for option in self.options if option.cheapest)

    def option(self, option_id: str) -> QuoteOption:
        for option in self.options:
            if option.id == option_id:
                return option
        valid = ", ".join(option.id for option in self.options) or "none"
        raise DomainError(f"unknown quote option {option_id!r}; valid options: {valid}", field="option")

    def to_json(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "expected_duration_hours": _fmt(self.expected_duration_hours.quantize(Decimal("0.01"))),
            "quoted_at": self.quoted_at.isoformat(),
            "options": [option.to_json() for option in self.options],
            "unavailable": list(self.unavailable),
            "unavailable_codes": [note.to_json() for note in self.refusals],  # params name the pool
            "duration_hours": _hours_text(self.expected_duration_hours),
            "duration_source": self.duration_source,
            **({"schedule": self.schedule.to_json(), "options": [
                {**option.to_json(), **self.schedule.option_month(option)} for option in self.options]}
               if self.schedule else {}),
        }


@dataclass(frozen=True)
class ScheduleMonth:
    """A scheduled spec's month: its runs in the 30 days from the quote (the cron line in its zone), each
    costing an option's total, so a month of an option is `runs` times its total."""

    cron: str
    time_zone: str
    runs: int

    def to_json(self) -> dict[str, Any]:
        return {"cron": self.cron, "time_zone": self.time_zone, "runs_per_month": self.runs}

    def option_month(self, option: QuoteOption) -> dict[str, str]:
        # each run is a job billed on its own: a month is that many of the run's total as shown, in cents
        return {"month_total": _fmt(quantize_money(option.amount_low, option.currency) * self.runs),
                "month_total_high": _fmt(quantize_money(option.amount_high, option.currency) * self.runs)}


def with_schedule_month(quote: Quote, cron: str, time_zone: str, runs: int) -> Quote:
    """The quote of a scheduled spec: its options' totals are one run's, its month `runs` of them."""
    return replace(quote, schedule=ScheduleMonth(cron, time_zone, runs))


class QuoteError(DomainError):
    """No pool can run the spec; the message lists why for each pool, `refusals` the same as codes
    (a refusal whose params name no pool is about the whole cluster)."""

    status = 422
    title = "No pool can run the spec"
    field = "spec"

    def __init__(self, *args: Any, refusals: Sequence[Note] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.refusals = tuple(refusals)


def _fmt(amount: Decimal) -> str:
    return format(amount, "f")


def _hours_text(hours: Decimal) -> str:
    """2.00 -> "2", 1.50 -> "1.5": hours as a person writes them."""
    return _fmt(hours.quantize(Decimal("0.01")).normalize())


# --------------------------------------------------------------------------- how a role is held


@dataclass(frozen=True)
class _Holding:
    sharing: str
    num_gpus: int
    gpu_milli: int
    gpu_mem_mib: int | None
    mig_profile: str | None
    share: Decimal  # GPUs charged per replica
    exact: bool  # what the role itself asked for


def _mig_memory_mib(profile: str) -> int:
    """What one instance holds (the MIG table's usable memory, a little under the name's figure)."""
    if _MIG_MEMORY.match(profile) is None:
        raise ValueError(f"MIG profile {profile!r} must look like 3g.40gb")
    return mig_memory_mib(profile)


def _ask(role: RoleSpec) -> tuple[Fraction, int | None]:
    """Guaranteed compute (GPUs per device) and GPU memory (MiB, None: no minimum) the role asks."""
    if role.sharing == "fraction":
        return Fraction(role.gpu_milli, MILLI_PER_GPU), role.gpu_mem_mib
    if role.sharing == "mig" and role.mig_profile:
        return Fraction(mig_compute_slices(role.mig_profile), MIG_SLICES_PER_GPU), _mig_memory_mib(
            role.mig_profile
        )
    return Fraction(1), None  # exclusive: whole GPUs; time-slice: nominally a whole GPU


def _hold(role: RoleSpec, pool: PoolOffer, mode: str) -> _Holding | None:
    """How ``role`` runs in ``pool`` with sharing ``mode``, or None if that would give it less."""
    if mode not in pool.sharing_modes:
        return None
    compute, memory = _ask(role)
    if memory is not None and memory > pool.gpu_memory_mib:
        return None
    own = role.sharing == mode
    if mode == "exclusive":
        count = role.num_gpus if own else 1
        if count > pool.gpus_per_node:
            return None
        share = charged_gpu_share("exclusive", num_gpus=count)
        return _Holding("exclusive", count, MILLI_PER_GPU, None, None, share, own)
    if role.num_gpus != 1:
        return None  # the shared modes hold one device per replica
    if mode == "fraction":
        milli = role.gpu_milli if own else math.ceil(compute * 100) * 10
        if milli > 990:
            return None
        share = charged_gpu_share(
            "fraction", gpu_milli=milli, gpu_mem_mib=memory, gpu_total_mem_mib=pool.gpu_memory_mib
        )
        return _Holding("fraction", 1, milli, memory, None, share, own)
    if mode == "mig":
        if own and role.mig_profile in pool.mig_profiles:
            profile: str | None = role.mig_profile
        else:
            fitting = [
                p
                for p in pool.mig_profiles
                if Fraction(mig_compute_slices(p), MIG_SLICES_PER_GPU) >= compute
                and _mig_memory_mib(p) >= (memory or 0)
            ]
            profile = min(fitting, key=lambda p: (mig_compute_slices(p), _mig_memory_mib(p), p), default=None)
        if profile is None:
            return None
        share = charged_gpu_share("mig", mig_profile=profile)
        milli = mig_slices_milli(mig_compute_slices(profile))
        return _Holding(
            "mig", 1, milli, _mig_memory_mib(profile), profile, share, own and profile == role.mig_profile
        )
    # time-slicing: a slot guarantees 1 / replicas of the GPU and no memory isolation
    if not own and Fraction(1, pool.timeslice_replicas) < compute:
        return None
    share = charged_gpu_share("timeslice", timeslice_replicas=pool.timeslice_replicas)
    return _Holding("timeslice", 1, MILLI_PER_GPU, None, None, share, own)


def _cpu_only(role: RoleSpec) -> bool:
    return role.num_gpus == 0


def _pool_refusal(spec: JobSpec, pool: PoolOffer) -> Note | None:
    """Why a role's pins (nodePool, vendor, gpuModel) rule the pool out, if they do (the reason is
    scheduling.core.fit's code)."""
    for role in spec.roles:
        request = role_request(role)
        if _cpu_only(role):  # CPU-only roles run on any vendor's nodes
            request = replace(request, vendor="any", gpu_model="")
        unfit = check_pool_identity(pool.traits, request)
        if unfit is not None:
            return _note("role_pool", pool=pool.name, role=role.name, reason=unfit.as_part())
    return None


def _empty_refusal(pool: PoolOffer) -> Note | None:
    """A pool no GPU node has joined yet runs nothing, not even CPU-only roles."""
    return _note("pool_has_no_nodes", pool=pool.name) if pool.is_empty else None


def _price_refusal(spec: JobSpec, pool: PoolOffer, rates: Rates) -> Note | None:
    """A pool whose GPUs the price table does not price (one of another currency's timeline) is not
    offered: a workspace is quoted, and runs, only where its currency has a rate."""
    if all(_cpu_only(role) for role in spec.roles):
        return None  # CPU-only work pays no GPU rate
    try:
        rates.gpu_rate(pool.vendor, pool.gpu_model)
    except ValueError:
        return _note("not_priced", pool=pool.name, currency=rates.currency, vendor=pool.vendor,
                     gpu_model=pool.gpu_model)
    return None


def _cluster_refusal(spec: JobSpec, pools: Sequence[PoolOffer]) -> Note | None:
    """The first role constraint no pool at all can meet (naming what is on offer), if any."""
    traits = [pool.traits for pool in pools]
    for role in spec.roles:
        unfit = check_pools(traits, role_request(role))
        if unfit is not None:
            return _note("role_cluster", pool=None, role=role.name, reason=unfit.as_part())
    return None


def _placements(spec: JobSpec, pool: PoolOffer) -> list[tuple[str, list[_Holding | None]]]:
    """(sharing label, holding per role: None for CPU-only roles) for each way the job fits."""
    gpu_roles = [role for role in spec.roles if not _cpu_only(role)]
    if not gpu_roles:
        return [(CPU_ONLY, [None] * len(spec.roles))]
    own_modes = {role.sharing for role in gpu_roles}
    candidates: list[tuple[str, dict[str, str]]] = []
    if len(own_modes) > 1:  # the spec's own mix, each role in its own mode
        label = "+".join(mode for mode in MODES if mode in own_modes)
        candidates.append((label, {role.name: role.sharing for role in gpu_roles}))
    candidates += [(mode, {role.name: mode for role in gpu_roles}) for mode in MODES]
    out = []
    for label, mode_of in candidates:
        holdings = [None if _cpu_only(role) else _hold(role, pool, mode_of[role.name]) for role in spec.roles]
        if all(h is not None for h, role in zip(holdings, spec.roles, strict=True) if not _cpu_only(role)):
            out.append((label, holdings))
    return out


def _ask_params(role: RoleSpec) -> dict[str, Any]:
    """What a role asks, as figures: the mode, whole GPUs, the share and memory of a fraction, the
    MIG profile."""
    return {"sharing": role.sharing, "gpus": role.num_gpus,
            "share": _number_text(Decimal(role.gpu_milli) / MILLI_PER_GPU), "gpu_mem_mib": role.gpu_mem_mib,
            "profile": role.mig_profile}


def _no_fit_reason(spec: JobSpec, pool: PoolOffer) -> Note:
    modes = [mode for mode in MODES if mode in pool.sharing_modes]
    profiles = sorted(pool.mig_profiles) if pool.mig_profiles and "mig" in pool.sharing_modes else []
    figures = {"pool": pool.name, "modes": modes, "profiles": profiles}
    for role in spec.roles:
        if not _cpu_only(role) and all(_hold(role, pool, mode) is None for mode in MODES):
            return _note("cannot_guarantee", **figures, role=role.name, ask=_ask_params(role))
    return _note("no_one_mode_fits", **figures)


# --------------------------------------------------------------------------- pricing an option


def _number_text(share: Decimal) -> str:
    return format(share.quantize(Decimal("0.01")).normalize(), "f")


def _needed_milli(spec: JobSpec, holdings: Sequence[_Holding | None]) -> int:
    return sum(
        role.min_replicas * int((h.share * MILLI_PER_GPU).to_integral_value(rounding=ROUND_CEILING))
        for role, h in zip(spec.roles, holdings, strict=True)
        if h is not None
    )


def _isolation_tradeoffs(spec: JobSpec, pool: PoolOffer, holdings: Sequence[_Holding | None]) -> list[Note]:
    notes: list[Note] = []
    for role, h in zip(spec.roles, holdings, strict=True):
        if h is None:
            continue
        named = len(spec.roles) > 1
        role_name = role.name if named else None
        if h.sharing == "timeslice":
            others = pool.timeslice_replicas - 1
            notes.append(_note("time_sliced", role=role_name, others=others))
        elif h.sharing == "fraction":
            notes.append(_note("shared_gpu", role=role_name, gpu_mem_mib=h.gpu_mem_mib))
        asked = _ask(role)[0] * role.num_gpus
        if not h.exact and Fraction(h.share) > asked:
            asked_gpus = Decimal(asked.numerator) / asked.denominator
            notes.append(_note("pays_for_more", role=role_name, share=_number_text(h.share),
                               asked=_number_text(asked_gpus)))
    return notes


def _wait_note(now: datetime, starts_at: datetime, tz: tzinfo) -> Note:
    local = starts_at.astimezone(tz)
    minutes = int((starts_at - now).total_seconds() // 60)
    return _note("waits_for_off_peak", minutes=minutes, at=f"{local:%H:%M}", zone=local.tzname())


@dataclass
class _Priced:
    """An option's money, summed over its roles unrounded: per hour at MinReplicas and MaxReplicas
    (peak, off-peak), for the duration (low, high, and low on whole GPUs) and the GPUs charged."""

    roles: list[RoleQuote] = field(default_factory=list)
    per_hour: Decimal = Decimal(0)
    per_hour_off: Decimal = Decimal(0)
    per_hour_max: Decimal = Decimal(0)
    per_hour_max_off: Decimal = Decimal(0)
    low: Decimal = Decimal(0)
    high: Decimal = Decimal(0)
    whole_low: Decimal = Decimal(0)
    gpus: Decimal = Decimal(0)


def _durations(spec: JobSpec) -> tuple[timedelta, timedelta]:
    """The low estimate's duration and the high one's: a job with maxRuntime runs at most that long, so that
    bounds both (the high estimate runs to it)."""
    expected = spec.expected_duration_s
    limit = spec.max_runtime_s
    if not limit:
        return timedelta(seconds=expected), timedelta(seconds=expected)
    return timedelta(seconds=min(expected, limit)), timedelta(seconds=limit)


def _price_roles(
    spec: JobSpec, pool: PoolOffer, holdings: Sequence[_Holding | None], rates: Rates, *, starts_at: datetime,
    tz: tzinfo, by_deadline: bool = False,
) -> _Priced:
    """Each role priced by the table's price rules (billing.pricing.rules) from ``starts_at``."""
    duration, duration_high = _durations(spec)
    priced = _Priced()
    for role, h in zip(spec.roles, holdings, strict=True):
        share = h.share if h is not None else Decimal(0)
        allocation = Allocation.from_units(share, pool.vendor if h is not None else None,
                                           pool.gpu_model if h is not None else None, cpu_milli=role.cpu_milli,
                                           mem_mib=role.mem_mib)
        at_min, at_max = (
            estimate(rates, allocation, start=starts_at, duration=length, tz=tz, priority=spec.priority,
                     spot=pool.spot, replicas=max(replicas, 1),  # a role at 0 replicas still shows its rate
                     by_deadline=by_deadline, deadline_discount=pool.deadline_discount)
            for replicas, length in ((role.min_replicas, duration), (role.max_replicas, duration_high))
        )
        priced.per_hour += role.min_replicas * at_min.price_per_hour
        priced.per_hour_off += role.min_replicas * at_min.price_per_hour_offpeak
        priced.per_hour_max += role.max_replicas * at_max.price_per_hour
        priced.per_hour_max_off += role.max_replicas * at_max.price_per_hour_offpeak
        priced.low += at_min.amount if role.min_replicas else Decimal(0)
        priced.high += at_max.amount
        priced.gpus += role.min_replicas * share
        if role.min_replicas:
            priced.whole_low += _on_whole_gpus(rates, allocation, h, role.min_replicas, pool, spec.priority,
                                               start=starts_at, duration=duration, tz=tz) if h is not None else at_min.amount
        priced.roles.append(RoleQuote(
            name=role.name, sharing=h.sharing if h is not None else CPU_ONLY, num_gpus=h.num_gpus if h is not None else 0,
            gpu_milli=h.gpu_milli if h is not None else 0, gpu_mem_mib=h.gpu_mem_mib if h is not None else None,
            mig_profile=h.mig_profile if h is not None else None, gpu_share=share, min_replicas=role.min_replicas,
            max_replicas=role.max_replicas, price_per_hour=at_min.price_per_hour,
            price_per_hour_offpeak=at_min.price_per_hour_offpeak))
    return priced


def _price_option(
    spec: JobSpec,
    pool: PoolOffer,
    label: str,
    holdings: Sequence[_Holding | None],
    rates: Rates,
    *,
    when: str,
    starts_at: datetime,
    now: datetime,
    tz: tzinfo,
) -> QuoteOption:
    priced = _price_roles(spec, pool, holdings, rates, starts_at=starts_at, tz=tz, by_deadline=when == DEADLINE)
    needed = _needed_milli(spec, holdings)
    enough_now = pool.free_milli_now is None or pool.free_milli_now >= needed
    tradeoffs = _isolation_tradeoffs(spec, pool, holdings)
    if pool.vendor == "amd" and any(h is not None for h in holdings):
        tradeoffs.append(_note("amd_rocm"))
    complete_by = deadline_of(spec, now) if when == DEADLINE else None
    if when == OFF_PEAK:
        tradeoffs.append(_wait_note(now, starts_at, tz))
    elif complete_by is not None:
        local = complete_by.astimezone(tz)
        tradeoffs.append(_note("by_deadline", at=f"{local:%Y-%m-%d %H:%M}", zone=local.tzname()))
    elif not enough_now:
        free = pool.free_milli_now or 0
        tradeoffs.append(_note("may_wait_for_capacity", pool=pool.name, free_milli=free, needed_milli=needed))
    if pool.spot:
        tradeoffs.append(_note("spot"))
    if spec.reduce_cost:
        tradeoffs.append(_note("reduce_cost"))
    elif spec.preemptible:
        tradeoffs.append(_note("preemptible"))

    gpu_holdings = [h for h in holdings if h is not None]
    # an array runs once per index: its totals are every index's (the prices per hour stay one run's)
    runs = spec.array.count if spec.array is not None else 1
    if runs > 1:
        tradeoffs.append(_note("array_runs", runs=runs, parallelism=spec.array.parallelism))
    return QuoteOption(
        id=f"{pool.name}.{label}.{when}",
        sharing=label,
        vendor=pool.vendor,
        gpu_model=pool.gpu_model,
        pool=pool.name,
        spot=pool.spot,
        when=when,
        starts_at=starts_at,
        price_per_hour=priced.per_hour,
        price_per_hour_offpeak=priced.per_hour_off,
        estimate_low=quantize_money(priced.low * runs, rates.currency),
        estimate_high=quantize_money(priced.high * runs, rates.currency),
        cheapest=False,
        can_start_now=when in (NOW, DEADLINE) and enough_now,
        matches_spec=all(h.exact for h in gpu_holdings),
        tradeoffs=tuple(note.text for note in tradeoffs),
        tradeoff_notes=tuple(tradeoffs),
        roles=tuple(priced.roles),
        currency=rates.currency,
        amount_low=priced.low * runs,
        amount_high=priced.high * runs,
        gpus=priced.gpus * runs,
        hours=Decimal(spec.expected_duration_s) / 3600,
        exclusive_amount=priced.whole_low * runs,
        expected_start=_first_estimate(when, starts_at, when in (NOW, DEADLINE) and enough_now),
        price_per_hour_max=priced.per_hour_max,
        price_per_hour_max_offpeak=priced.per_hour_max_off,
        complete_by=complete_by,
        starts_offpeak=when == OFF_PEAK or (bool(rates.offpeak_windows) and is_offpeak(
            starts_at, rates.offpeak_windows, rates.windows_zone(tz))),
    )


def deadline_of(spec: JobSpec, now: datetime) -> datetime | None:
    """The instant a spec's `completeBy` / `completeWithin` names for a job submitted now."""
    deadline = spec.deadline
    if deadline is None:
        return None
    if deadline.at is not None:
        return datetime.fromisoformat(deadline.at)
    return now + timedelta(seconds=deadline.within_s or 0)


def _on_whole_gpus(
    rates: Rates, allocation: Allocation, h: _Holding, replicas: int, pool: PoolOffer, priority: int, *,
    start: datetime, duration: timedelta, tz: tzinfo,
) -> Decimal:
    """What ``replicas`` of a role would cost with each device it holds as an exclusive whole GPU."""
    whole = replace(allocation, share=charged_gpu_share("exclusive", num_gpus=h.num_gpus))
    return estimate(rates, whole, start=start, duration=duration, tz=tz, priority=priority, spot=pool.spot,
                    replicas=replicas).amount


def _first_estimate(when: str, starts_at: datetime, fits_now: bool) -> datetime | None:
    """The pure quote's guess at a start from the pools' free totals; :func:`with_expected_starts`
    replaces it with what the cluster's nodes say."""
    if when == OFF_PEAK:
        return starts_at
    return starts_at if fits_now else None


def _cheapness(option: QuoteOption) -> tuple[Decimal, Decimal, Decimal, bool, bool, str]:
    """Cheapest first; ties go to the spec's own choice, then one that can start now, then the id."""
    return (
        option.amount_low,
        option.amount_high,
        option.price_per_hour,
        not option.matches_spec,
        not option.can_start_now,
        option.id,
    )


# --------------------------------------------------------------------------- the quote


def quote(spec: JobSpec, pools: Sequence[PoolOffer], rates: Rates, *, now: datetime, tz: tzinfo) -> Quote:
    """Every option ``pools`` offer for ``spec``, priced with ``rates``; raises QuoteError if none.

    ``now`` is the quoting instant (aware); ``tz`` the platform time zone in which the off-peak
    windows are read. Options are ordered cheapest first.
    """
    require_aware(now, "now")
    if not isinstance(tz, tzinfo):
        raise ValueError(f"tz must be a tzinfo (e.g. ZoneInfo('Europe/Berlin')), got {tz!r}")
    if not pools:
        raise QuoteError("there are no node pools to quote against")
    names = [pool.name for pool in pools]
    if len(set(names)) != len(names):
        raise ValueError(f"pool names must be unique, got {names}")

    windows = rates.offpeak_windows
    windows_tz = rates.windows_zone(tz)
    offpeak_now = bool(windows) and is_offpeak(now, windows, windows_tz)
    starts: list[tuple[str, datetime]] = [(NOW, now)]
    # already off-peak: "now" is the off-peak start; interactive work (a notebook) is wanted now, not tonight; a
    # schedule's runs start at their fire times (its cron line picks the hours)
    if windows and not offpeak_now and kinds.kind_of(spec).off_peak and spec.schedule is None:
        starts.append((OFF_PEAK, next_offpeak_start(now, windows, windows_tz)))
    if spec.deadline is not None and spec.schedule is None and not spec.reduce_cost:  # priced by its rule, from now
        starts.append((DEADLINE, now))

    options: list[QuoteOption] = []
    refusals: list[Note] = []
    for pool in pools:
        refusal = _pool_refusal(spec, pool) or _empty_refusal(pool) or _price_refusal(spec, pool, rates)
        placements = [] if refusal else _placements(spec, pool)
        if not refusal and not placements:
            refusal = _no_fit_reason(spec, pool)
        if not refusal and pool.total_gpus is not None:
            fitting = [
                (label, hs) for label, hs in placements if _needed_milli(spec, hs) <= pool.total_gpus * MILLI_PER_GPU
            ]
            if not fitting:
                needed = min(_needed_milli(spec, hs) for _, hs in placements)
                refusal = _note("pool_too_small", pool=pool.name, total_gpus=pool.total_gpus, needed_milli=needed,
                                min_replicas=spec.min_replicas)
            placements = fitting
        if not refusal and spec.reduce_cost and not pool.spot and not windows:
            refusal = _note("reduce_cost_no_window", pool=pool.name)
        if not refusal:
            refusal = _topology_refusal(spec, pool)
        if refusal:
            refusals.append(refusal)
            continue
        for when, starts_at in starts:
            if spec.reduce_cost and when == NOW and not pool.spot and not offpeak_now:
                continue  # ReduceCost: only off-peak or spot
            for label, holdings in placements:
                option = _price_option(
                    spec, pool, label, holdings, rates, when=when, starts_at=starts_at, now=now, tz=tz
                )
                options.extend(_with_topology(spec, pool, option, _needed_milli(spec, holdings)))
    unavailable = [f"{note.params['pool']}: {note.text}" for note in refusals]
    if not options:
        why = _cluster_refusal(spec, pools)
        raise QuoteError("no pool can run this job: " + "; ".join(([why.text] if why else []) + unavailable),
                         refusals=([why] if why else []) + refusals)

    options.sort(key=_cheapness)
    options[0] = replace(options[0], cheapest=True)
    return Quote(
        currency=rates.currency,
        expected_duration_hours=Decimal(spec.expected_duration_s) / 3600,
        options=_mark_earliest(options),
        quoted_at=now,
        unavailable=tuple(unavailable),
        refusals=tuple(refusals),
    )


def _pool_level(pool: PoolOffer, level: str) -> tuple[str, int] | None:
    """The pool's level a job names (by its label key or the key's last part), with its largest domain's GPUs."""
    return next(((key, gpus) for key, gpus in pool.topology if level in (key, level_name(key))), None)


def _topology_refusal(spec: JobSpec, pool: PoolOffer) -> Note | None:
    """A spec that requires a level the pool does not have (the node level every pool has)."""
    topology = spec.topology
    if topology is None or not topology.required or topology.level == "node" or _pool_level(pool, topology.level):
        return None
    return _note("topology_level_missing", pool=pool.name, level=topology.level,
                 levels=[level_name(key) for key, _ in pool.topology])


def _with_topology(spec: JobSpec, pool: PoolOffer, option: QuoteOption, needed_milli: int) -> list[QuoteOption]:
    """The option as the spec's topology has it; and for a gang in a pool with topology levels whose spec asks
    none, the same option kept within one domain of the innermost level whose largest domain holds the gang
    (the same price: it may wait longer for a domain with room)."""
    if spec.topology is not None:
        kind = "required" if spec.topology.required else "preferred"
        note = _note("topology_one_domain", pool=pool.name, level=spec.topology.level, required=spec.topology.required)
        return [_add_note(replace(option, topology=(kind, spec.topology.level)), note)]
    if spec.min_replicas < 2 or not pool.topology:
        return [option]
    level = next((level_name(key) for key, gpus in reversed(pool.topology) if gpus * MILLI_PER_GPU >= needed_milli),
                 None)
    if level is None:
        return [option]
    within = replace(option, id=f"{option.id}.{level}", topology=("required", level), matches_spec=False,
                     can_start_now=False, expected_start=None if option.when == NOW else option.expected_start)
    return [option, _add_note(within, _note("topology_one_domain", pool=pool.name, level=level, required=True))]


def _add_note(option: QuoteOption, note: Note) -> QuoteOption:
    notes = (*option.tradeoff_notes, note)
    return replace(option, tradeoff_notes=notes, tradeoffs=tuple(n.text for n in notes))


def _mark_earliest(options: Sequence[QuoteOption]) -> tuple[QuoteOption, ...]:
    """One option flagged earliest: the soonest expected start, then the cheapest; none when no
    option has an estimate."""
    dated = [o for o in options if o.expected_start is not None]
    first = min(dated, key=lambda o: (o.expected_start, _cheapness(o)), default=None)
    return tuple(replace(o, earliest=o is first) for o in options)


def with_expected_starts(quote: Quote, starts: Mapping[str, datetime | None],
                         held: Mapping[str, Note] | None = None) -> Quote:
    """``quote`` with the expected start of each option named in ``starts`` (None: queued, no
    estimate), ``can_start_now`` and the earliest flag following them, and the trade-offs saying
    when a ``now`` option has to wait: ``held``'s note for an option its queue's quota or the workspace's
    budget holds (see `quota_note`, `budget_note`), else the shortage of GPUs."""
    options = []
    held = held or {}
    for option in quote.options:
        if option.id not in starts:
            options.append(option)
            continue
        why = held.get(option.id)
        moved = replace(option, expected_start=starts[option.id])
        notes = [n for n in option.tradeoff_notes if n.code not in _WAIT_CODES]
        if option.when == NOW and (why is not None or not moved.starts_now):
            waits = why or next((n for n in option.tradeoff_notes if n.code in _WAIT_CODES), None)
            notes.insert(0, waits or _note("no_room_now", pool=option.pool))
        options.append(replace(moved, can_start_now=moved.starts_now and why is None,
                               tradeoffs=tuple(n.text for n in notes), tradeoff_notes=tuple(notes)))
    return replace(quote, options=_mark_earliest(options))


def quota_note(code: str, params: Mapping[str, Any]) -> Note:
    """A ``now`` option its queue's quota holds, from the scheduler's reason (`queue_over_limit` or
    `queue_non_preemptible_quota`, with the queue and its figures in milli-GPU)."""
    if code == "queue_over_limit":
        return _note("queue_limit_full", queue=params["queue"], limit_milli=params["limit_milli"],
                     used_milli=params["used_milli"], needed_milli=params["need_milli"])
    return _note("queue_quota_full", queue=params["queue"], deserved_milli=params["deserved_milli"],
                 used_milli=params["used_milli"], needed_milli=params["need_milli"])


def budget_note() -> Note:
    """A ``now`` option of a workspace that spent its budget and blocks new work at the limit."""
    return _note("budget_blocks")


def with_preemptible_variants(quote: Quote, queues: Mapping[str, str]) -> Quote:
    """Beside each ``now`` option named in ``queues`` (a non-preemptible spec's, held by that queue's deserved
    quota) the same option as preemptible work, which would start now: same price, evictable for
    higher-priority work."""
    options: list[QuoteOption] = []
    for option in quote.options:
        options.append(option)
        if option.id not in queues:
            continue
        notes = [n for n in option.tradeoff_notes if n.code not in _WAIT_CODES]
        notes = [_note("as_preemptible", queue=queues[option.id]), *notes, _note("preemptible")]
        options.append(replace(option, id=f"{option.id}.preemptible", as_preemptible=True, matches_spec=False,
                               expected_start=option.starts_at, can_start_now=True, earliest=False,
                               tradeoff_notes=tuple(notes), tradeoffs=tuple(n.text for n in notes)))
    return replace(quote, options=_mark_earliest(options))


EVICTABLE_CODES = frozenset({"spot", "reduce_cost", "preemptible"})  # an option these say can be evicted
CHECKPOINT_HINT_S = 30 * 60  # the interval the trade-off suggests to a job without resumable checkpoints


def with_expected_loss(quote: Quote, spec: JobSpec, evictions: int, gpu_hours_run: Decimal) -> Quote:
    """``quote`` with each evictable option's expected loss at its queue's recent rate (``evictions`` of the
    queue's replicas over the ``gpu_hours_run`` they ran): expected evictions (rate x the option's GPU-hours),
    each losing a replica's GPUs for half a checkpoint interval (a resumable spec) or half the run."""
    if gpu_hours_run <= 0:
        return quote
    rate = Decimal(evictions) / gpu_hours_run
    duration_s = spec.expected_duration_s
    checkpoint = spec.checkpoint
    resumable = checkpoint is not None and checkpoint.resumable and checkpoint.every_s
    between_s = min(checkpoint.every_s, duration_s) if resumable else duration_s
    runs = spec.array.count if spec.array is not None else 1
    options = []
    for option in quote.options:
        replicas = sum(r.min_replicas for r in option.roles if r.gpu_share > 0) * runs
        per_hour = option.price_per_gpu_hour
        if not {n.code for n in option.tradeoff_notes} & EVICTABLE_CODES or not replicas or per_hour is None:
            options.append(option)
            continue
        gpu_hours = option.gpus * option.hours
        lost = min(rate * gpu_hours * Decimal(between_s) / 2 / 3600 * option.gpus / replicas, gpu_hours)
        loss = ExpectedLoss(gpu_hours=lost, cost=lost * per_hour, evictions_per_gpu_hour=rate)
        notes = list(option.tradeoff_notes)
        if lost.quantize(_LOSS_PLACES) > 0:
            notes.append(_note("expected_loss", gpu_hours=_fmt(lost.quantize(_LOSS_PLACES)),
                               cost=_fmt(quantize_money(loss.cost, option.currency)), currency=option.currency,
                               checkpoint_hint=not resumable and duration_s > CHECKPOINT_HINT_S))
        options.append(replace(option, expected_loss=loss, tradeoff_notes=tuple(notes),
                               tradeoffs=tuple(n.text for n in notes)))
    return replace(quote, options=tuple(options))


def with_duration_source(quote: Quote, source: str) -> Quote:
    if source not in DURATION_SOURCES:
        raise ValueError(f"duration source {source!r} is not one of {', '.join(DURATION_SOURCES)}")
    return replace(quote, duration_source=source)


def quote_at(
    spec: JobSpec, pools: Sequence[PoolOffer], tables: Iterable[PriceTable], *, now: datetime, tz: tzinfo
) -> Quote:
    """:func:`quote` with the price table in force at ``now`` (a later table never changes it)."""
    return quote(spec, pools, table_in_force(tables, now).rates, now=now, tz=tz)


def choose_option(quote: Quote, option_id: str | None, spec: JobSpec) -> QuoteOption:
    """The option a submission runs with.

    The named option (ValueError naming the bad id and the valid ones); else the cheapest option
    that keeps the spec's own choices and can start now; else the cheapest that can start now;
    else the spec's own choices to start now, waiting in its queue for capacity (reclaim or
    preemption may free it: nobody asked for off-peak); else the cheapest. A preemptible variant is taken
    only by name: a job is never made evictable without asking.
    """
    if option_id is not None:
        return quote.option(option_id)
    if not quote.options:
        raise DomainError(f"the quote for job '{spec.name}' has no options", field="option")
    ranked = sorted((o for o in quote.options if not o.as_preemptible), key=_cheapness)
    for wanted in (
        lambda o: o.matches_spec and o.can_start_now,
        lambda o: o.can_start_now,
        lambda o: o.matches_spec and o.when == "now",
    ):
        found = [o for o in ranked if wanted(o)]
        if found:
            return found[0]
    return ranked[0] if ranked else quote.cheapest
