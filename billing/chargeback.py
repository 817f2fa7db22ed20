"""Chargeback: who pays for the capacity nobody held.

Each pool has a policy (ChargebackPolicy; none: showback). For a month, a pool's priced capacity is
its GPUs in every hour at list (the peak, on-demand price per GPU-hour of its model in the table in
force that hour), summed and rounded once. What its usage lines billed is the direct cost; the rest
(idle and unallocated capacity, and the discounts the lines got) is shared out:

- showback: to no one (the pool counts what it billed, so the totals still add up);
- proportional: by each workspace's allocated GPU-hours in the pool that month;
- by-quota: by deserved quota (each queue's deserved GPUs, split evenly between the workspaces that use it);
- to-account: all to one billing account's workspaces, by their allocated GPU-hours.

A share is split in minor units by largest remainders, so the shares add up to the rest exactly: for
every policy but showback, direct plus shares is the pool's priced capacity, to the cent. A rest below
zero (lines billed more than list) is shared the same way, as a rebate. With no weights (nobody used
the pool) the rest goes evenly to the month's billed workspaces (to-account: the account's), else to
every workspace with a queue; with no workspace at all it stays `uncharged`.

Figures are in the platform's currency; another currency converts each line at its day's rate
(billing.exchange_rates). Until the month's hours are final, shares are provisional and computed on
demand; then post_chargeback writes them once (ChargebackPosting, ChargebackShare) with a ledger line
per workspace (category Usage, charge_kind idle-share), in the workspace's currency.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.apps import apps
from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils.translation import gettext

from billing import pricing
from billing.accounts import account_workspace_ids
from billing.currency import Currencies, check_currency, default_currency
from billing.exchange_rates import RateBook, rate_day
from billing.ledger import periods
from billing.ledger.periods import month_end, period_bounds, period_start
from billing.ledger.posting import close_grace
from billing.ledger.selectors import ledger_cursor
from billing.models import (
    AccountWorkspace,
    BillingAccount,
    ChargebackPolicy,
    ChargebackPosting,
    ChargebackShare,
    ChargeLine,
)
from billing.selectors import price_tables
from scheduling.api import DomainError, clock
from scheduling.models import NodePool, QueueAccess

ZERO = Decimal(0)
HOUR = timedelta(hours=1)
IDLE_SHARE = "idle-share"
POLICIES = tuple(ChargebackPolicy.Policy.values)
Convert = Callable[[Decimal, str, date], Decimal]  # (amount, its currency, its day) -> the report's currency


class ChargebackError(DomainError):
    field = "month"


@dataclass
class PoolChargeback:
    pool: str
    policy: str
    account: str
    capacity_cost: Decimal          # priced capacity (showback: what the pool's lines billed)
    direct: dict[int, Decimal]      # workspace id -> what its lines in the pool billed
    shares: dict[int, Decimal]      # workspace id -> its share of the rest
    uncharged: Decimal = ZERO       # the rest, when there was no workspace at all to charge it to

    @property
    def direct_cost(self) -> Decimal:
        return sum(self.direct.values(), ZERO)

    @property
    def idle_share(self) -> Decimal:
        return sum(self.shares.values(), ZERO)


@dataclass
class ChargebackRow:
    workspace: str
    account: str | None
    direct: Decimal
    idle_share: Decimal

    @property
    def total(self) -> Decimal:
        return self.direct + self.idle_share


@dataclass
class Chargeback:
    month: date
    currency: str
    as_of: datetime | None
    provisional: bool
    pools: list[PoolChargeback] = field(default_factory=list)
    rows: list[ChargebackRow] = field(default_factory=list)

    @property
    def capacity_cost(self) -> Decimal:
        return sum((p.capacity_cost for p in self.pools), ZERO)

    @property
    def total(self) -> Decimal:
        return sum((r.total for r in self.rows), ZERO)


def parse_month(raw: str | None) -> date:
    """YYYY-MM as the month's first day; ChargebackError otherwise."""
    try:
        return periods.parse_month(raw)
    except periods.MonthError:
        raise ChargebackError(gettext("month: give the month as YYYY-MM, e.g. 2026-11")) from None


# --------------------------------------------------------------------------- policies


def save_policy(pool: NodePool, policy: str, account: BillingAccount | None = None) -> ChargebackPolicy:
    """Set a pool's policy; to-account needs an account that holds a workspace."""
    if policy not in POLICIES:
        raise ChargebackError(gettext("policy: choose one of %(known)s") % {"known": ", ".join(POLICIES)},
                              field="policy")
    if policy == ChargebackPolicy.Policy.TO_ACCOUNT:
        if account is None:
            raise ChargebackError(gettext("account: the to-account policy needs an account"), field="account")
        if not account_workspace_ids(account):
            raise ChargebackError(gettext("account: %(account)s holds no workspace to charge") % {
                "account": account.slug}, field="account")
    else:
        account = None
    row, _ = ChargebackPolicy.objects.update_or_create(pool=pool, defaults={"policy": policy, "account": account})
    return row


def policies() -> dict[str, ChargebackPolicy]:
    return {p.pool.name: p for p in ChargebackPolicy.objects.select_related("pool", "account")}


# --------------------------------------------------------------------------- figures


def _converter(currency: str) -> Convert:
    """Unrounded conversion into `currency` at the operator's rate day for a line of `day` (a missing rate:
    exchange_rates.MissingRate, never 1.0)."""
    books: list[RateBook] = []  # read only when a line is in another currency: most months have none

    def convert(amount: Decimal, source: str, day: date) -> Decimal:
        if source == currency:
            return amount
        if not books:
            books.append(RateBook(currency))
        return amount * books[0].rate(source, rate_day(day, day.replace(day=1)))
    return convert


def _priced_capacity(pool: NodePool, gpus: int, tables, start: datetime, end: datetime) -> Decimal | None:
    """The pool's GPUs at list in every hour of [start, end), unrounded; None when no hour has a price."""
    total, priced, hour = ZERO, False, start.astimezone(UTC)
    while hour < end:
        try:
            total += gpus * pricing.table_in_force(tables, hour).rates.gpu_rate(pool.vendor, pool.gpu_model)
            priced = True
        except ValueError:  # no table then, or no rate for the model: unpriced capacity is charged to no one
            pass
        hour += HOUR
    return total if priced else None


def split(amount: Decimal, weights: dict[int, Decimal], currency: str) -> dict[int, Decimal]:
    """`amount` (already rounded) split by `weights` in minor units, by largest remainders: exact sum."""
    if not weights:
        return {}
    unit = Decimal(1).scaleb(-pricing.minor_unit(currency))
    total = sum(weights.values(), ZERO)
    if total <= 0:
        weights, total = dict.fromkeys(weights, Decimal(1)), Decimal(len(weights))
    units = int(amount / unit)
    sign = -1 if units < 0 else 1
    exact = {k: abs(units) * w / total for k, w in weights.items()}
    floors = {k: int(v) for k, v in exact.items()}
    left = abs(units) - sum(floors.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - floors[k]), k))[:left]:
        floors[k] += 1
    return {k: sign * n * unit for k, n in floors.items()}


def _quota_weights(workspace_ids: Iterable[int]) -> dict[int, Decimal]:
    """Each workspace's deserved GPUs: its queues', a queue shared by n workspaces giving 1/n to each."""
    accesses = list(QueueAccess.objects.values_list("queue_id", "workspace_id", "queue__deserved_gpus"))
    sharing = defaultdict(int)
    for queue, _, _ in accesses:
        sharing[queue] += 1
    weights = dict.fromkeys(workspace_ids, ZERO)
    for queue, workspace, deserved in accesses:
        if workspace in weights:
            weights[workspace] += Decimal(deserved) / sharing[queue]
    return weights


def _live_pool(pool: NodePool, gpus: int, rule: ChargebackPolicy | None, usage: dict, billed: list[int],
               tables, start: datetime, end: datetime, currency: str) -> PoolChargeback:
    direct = {ws: pricing.quantize_money(cost, currency) for ws, (cost, _) in usage.items()}
    policy = rule.policy if rule else ChargebackPolicy.Policy.SHOWBACK
    account = rule.account.slug if rule and rule.account else ""
    capacity = _priced_capacity(pool, gpus, tables, start, end) if policy != "showback" else None
    if capacity is None:  # showback, or nothing priced: the pool counts what it billed
        return PoolChargeback(pool.name, policy, account, sum(direct.values(), ZERO), direct, {})
    capacity = pricing.quantize_money(capacity, currency)
    if policy == ChargebackPolicy.Policy.TO_ACCOUNT:
        members = account_workspace_ids(rule.account)
        weights = {ws: usage.get(ws, (ZERO, ZERO))[1] for ws in members}
    elif policy == ChargebackPolicy.Policy.BY_QUOTA:
        weights = _quota_weights(set(billed) | set(usage))
        if not any(weights.values()):
            weights = {ws: Decimal(1) for ws in weights}
    else:
        weights = {ws: hours for ws, (_, hours) in usage.items()} or dict.fromkeys(billed, ZERO)
    if not weights:  # nobody billed this month: whoever may use the cluster, evenly
        weights = dict.fromkeys(QueueAccess.objects.values_list("workspace_id", flat=True).distinct(), ZERO)
    rest = capacity - sum(direct.values(), ZERO)
    if not weights:
        return PoolChargeback(pool.name, policy, account, capacity, direct, {}, uncharged=rest)
    return PoolChargeback(pool.name, policy, account, capacity, direct, split(rest, weights, currency))


def _usage_by_pool(month: date, convert: Convert) -> tuple[dict[str, dict[int, tuple[Decimal, Decimal]]], list[int]]:
    """{pool: {workspace id: (direct cost unrounded in the report's currency, allocated GPU-hours)}}, and the
    month's billed workspaces."""
    usage: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(lambda: [ZERO, ZERO]))
    lines = (ChargeLine.objects.filter(period=month, category=ChargeLine.Category.USAGE)
             .exclude(pool="").exclude(charge_kind=IDLE_SHARE)
             .values("pool", "workspace_id", "currency", "day")
             .annotate(cost=Sum("cost"), hours=Sum("allocated_gpu_hours")))
    for row in lines:
        figures = usage[row["pool"]][row["workspace_id"]]
        figures[0] += convert(row["cost"], row["currency"], row["day"])
        figures[1] += row["hours"]
    billed = sorted(set(ChargeLine.objects.filter(period=month).values_list("workspace_id", flat=True)))
    return {pool: {ws: tuple(v) for ws, v in by_ws.items()} for pool, by_ws in usage.items()}, billed


def chargeback(month: date, *, currency: str | None = None, now: datetime | None = None,
               workspace_ids: Iterable[int] | None = None) -> Chargeback:
    """The month's chargeback in `currency` (default: the platform's): posted figures once the month is
    posted and asked in the platform's currency, else computed now (provisional until posted)."""
    now = now or clock.now()
    month = month.replace(day=1)
    platform = default_currency()
    currency = check_currency(currency) if currency else platform
    start, end = period_bounds(month)
    posted = list(ChargebackPosting.objects.filter(period=month).prefetch_related("shares"))
    if posted:
        pools = _posted_pools(posted, month)
        result = Chargeback(month, platform, max(p.posted_at for p in posted), False, pools)
    else:
        usage, billed = _usage_by_pool(month, _converter(platform))
        tables, rules = price_tables(platform), policies()
        gpus = dict(NodePool.objects.annotate(n=Count("nodes__gpus")).values_list("name", "n"))
        pools = [_live_pool(pool, gpus.get(pool.name, 0), rules.get(pool.name), usage.get(pool.name, {}), billed,
                            tables, start, min(end, now), platform)
                 for pool in NodePool.objects.order_by("name")]
        result = Chargeback(month, platform, ledger_cursor().posted_until, True, pools)
    if currency != platform:
        convert = _converter(currency)
        result.pools = [_converted(p, currency, month, convert) for p in result.pools]
        result.currency = currency
    result.rows = _rows(result.pools, workspace_ids=workspace_ids)
    return result


def _converted(figures: PoolChargeback, currency: str, month: date, convert: Convert) -> PoolChargeback:
    """A pool's platform-currency figures in `currency`: the capacity at the month's last day, the rest split
    again so that the sum stays exact in this currency too."""
    platform = default_currency()
    last = month_end(month)
    capacity = pricing.quantize_money(convert(figures.capacity_cost, platform, last), currency)
    direct = {ws: pricing.quantize_money(convert(v, platform, last), currency) for ws, v in figures.direct.items()}
    if not figures.shares:
        return PoolChargeback(figures.pool, figures.policy, figures.account, sum(direct.values(), ZERO), direct, {})
    weights = {ws: abs(v) for ws, v in figures.shares.items()}
    rest = capacity - sum(direct.values(), ZERO)
    return PoolChargeback(figures.pool, figures.policy, figures.account, capacity, direct, split(rest, weights, currency))


def _posted_pools(posted: list[ChargebackPosting], month: date) -> list[PoolChargeback]:
    direct_by_pool, _ = _usage_by_pool(month, _converter(default_currency()))
    out = []
    for posting in posted:
        direct = {ws: pricing.quantize_money(cost, posting.currency)
                  for ws, (cost, _) in direct_by_pool.get(posting.pool, {}).items()}
        shares = {share.workspace_id: share.amount for share in posting.shares.all()}
        out.append(PoolChargeback(posting.pool, posting.policy, posting.account, posting.capacity_cost, direct, shares))
    return out


def _rows(pools: list[PoolChargeback], *, workspace_ids) -> list[ChargebackRow]:
    Workspace = apps.get_model("portal", "Workspace")  # noqa: N806  (by name: billing does not import portal)

    direct: dict[int, Decimal] = defaultdict(Decimal)
    shares: dict[int, Decimal] = defaultdict(Decimal)
    for pool in pools:
        for ws, amount in pool.direct.items():
            direct[ws] += amount
        for ws, amount in pool.shares.items():
            shares[ws] += amount
    ids = set(direct) | set(shares)
    if workspace_ids is not None:
        ids &= set(workspace_ids)
    slugs = dict(Workspace.objects.filter(pk__in=ids).values_list("pk", "slug"))
    accounts = {link.workspace_id: link.account.slug
                for link in AccountWorkspace.objects.select_related("account").filter(workspace_id__in=ids)}
    return sorted((ChargebackRow(slugs[ws], accounts.get(ws), direct.get(ws, ZERO), shares.get(ws, ZERO))
                   for ws in ids), key=lambda r: r.workspace)


# --------------------------------------------------------------------------- posting


def month_is_final(month: date, now: datetime | None = None) -> bool:
    _, end = period_bounds(month)
    cursor = ledger_cursor()
    return cursor.closed_until is not None and cursor.closed_until >= end and (now or clock.now()) >= end + close_grace()


@transaction.atomic
def post_chargeback(month: date, *, now: datetime | None = None) -> list[ChargebackPosting]:
    """Write the month's shares once its hours are final: one posting per pool, a share and a ledger line
    per workspace. Posting twice writes nothing more."""
    now = now or clock.now()
    month = month.replace(day=1)
    if not month_is_final(month, now):
        raise ChargebackError(gettext("month: %(month)s is not final yet") % {"month": f"{month:%Y-%m}"})
    if ChargebackPosting.objects.filter(period=month).exists():
        return list(ChargebackPosting.objects.filter(period=month))
    figures = chargeback(month, now=now)
    platform = figures.currency
    start, end = period_bounds(month)
    last_hour = end.astimezone(UTC) - HOUR
    # Every share's currency from one query, and one converter (it reads its rates once) per currency
    shared = {ws for pool in figures.pools for ws in pool.shares}
    currencies = Currencies(shared)
    converters = {currency: _converter(currency) for currency in {currencies.of(ws, month) for ws in shared}}
    postings = []
    try:
        with transaction.atomic():
            for pool in figures.pools:
                posting = ChargebackPosting.objects.create(
                    period=month, pool=pool.pool, policy=pool.policy, account=pool.account, currency=platform,
                    capacity_cost=pool.capacity_cost, direct_cost=pool.direct_cost, posted_at=now)
                postings.append(posting)
                for ws, amount in sorted(pool.shares.items()):
                    currency = currencies.of(ws, month)
                    cost = amount if currency == platform else pricing.quantize_money(
                        converters[currency](amount, platform, month_end(month)), currency)
                    line = _share_line(pool, ws, cost, currency, month, start, end, last_hour, now)
                    ChargebackShare.objects.create(posting=posting, workspace_id=ws, amount=amount, line=line)
    except IntegrityError:  # another worker posted the month first
        return list(ChargebackPosting.objects.filter(period=month))
    return postings


def _share_line(pool: PoolChargeback, workspace_id: int, cost: Decimal, currency: str, month: date,
                start: datetime, end: datetime, last_hour: datetime, now: datetime) -> ChargeLine:
    reason = gettext("Share of pool %(pool)s's idle and unallocated capacity (%(policy)s)") % {
        "pool": pool.pool, "policy": pool.policy}
    return ChargeLine.objects.create(
        category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.COMPUTE, hour=last_hour,
        day=month_end(month), period=month, charge_start=start, charge_end=end, workspace_id=workspace_id,
        pool=pool.pool, cost=cost, currency=currency, provisional=False, computed_at=now, reason=reason,
        charge_kind=IDLE_SHARE, sku_id=f"{pool.pool}/idle-share")


def post_due_chargebacks(now: datetime | None = None) -> int:
    """Post the last month once it is final, if it is not posted yet and has lines (the ledger task calls
    it each time it posts; closing a workspace's month posts it too). Returns how many months it posted."""
    now = now or clock.now()
    last = (period_start(now) - timedelta(days=1)).replace(day=1)
    if (ChargebackPosting.objects.filter(period=last).exists() or not month_is_final(last, now)
            or not ChargeLine.objects.filter(period=last).exists()):
        return 0
    post_chargeback(last, now=now)
    return 1
