"""The one costs selector: every money figure on a page, in the API, an export, a statement or a
budget is a sum of the ledger's stored lines read through here, so they all give the same cents.

Always scoped to the workspaces the user belongs to: any membership (owner, member, viewer,
finance) shows that workspace's costs; someone who is not a member sees nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, DecimalField, F, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from billing import exchange_rates
from billing.chargeback import IDLE_SHARE, split
from billing.currency import check_currency, default_currency, workspace_currencies
from billing.ledger import periods
from billing.ledger.kept import ledger_read
from billing.ledger.periods import FIRST_YEAR, LAST_YEAR
from billing.ledger.selectors import as_of, money_sum, sums_by_currency, workspace_currency
from billing.models import ChargeLine
from billing.pricing import quantize_money
from billing.reports import consolidation
from scheduling.api import DomainError
from scheduling.models import Replica

SHARING_MODES = ("exclusive", "fraction", "mig", "timeslice")
# Names read from the line's job when it is read, not from the line: a person's name as it is now (an
# anonymised user's pseudonym), while the line's own `submitter` column keeps what was written (read only
# for a line without a job's user).
RENDERED = {"submitted_by": Coalesce(F("job__submitted_by__username"), F("submitter"))}
# group_by value -> the line columns (or RENDERED names) that name a row
GROUPS: dict[str, tuple[str, ...]] = {
    "day": ("day",), "queue": ("queue",), "job": ("job_id", "job_name"), "user": ("submitted_by", "period"),
    "gpu_model": ("gpu_model",), "pool": ("pool",), "workspace": ("workspace__slug", "workspace__name"),
    "resource": ("resource",),  # compute or storage
}
MAX_PAGE_ROWS = 500
QUANTITY = Decimal("0.000001")  # GPU-, core- and GiB-hours as shown
MAX_RANGE_DAYS = 3660
MAX_FILTER_LENGTH = 200
MAX_JOB_ID = 2**63 - 1
SUMMED = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "cpu_core_hours", "memory_gib_hours",
          "exclusive_gpu_hours", "storage_gib_hours", "list_cost", "exclusive_cost", "cost")
MONEY = ("list_cost", "exclusive_cost", "cost")


class FilterError(DomainError):
    """A report filter that cannot be read; the message names the field."""


class RangeError(FilterError):
    """Two days that each are valid but make no range the report can read (the end before the start, or too
    long): understood, but not processable (422), as no schema of the parameters alone can say."""

    status = 422


@dataclass(frozen=True)
class ReportFilters:
    start: date
    end: date  # inclusive
    workspace: str = ""
    queue: str = ""
    gpu_model: str = ""
    sharing: str = ""
    job: int | None = None
    group_by: str = ""
    currency: str = ""  # a reporting currency every amount is consolidated into (billing.reports.consolidation)

    def to_json(self) -> dict:
        data = asdict(self)
        data["start"], data["end"] = self.start.isoformat(), self.end.isoformat()
        return data

    def to_query(self) -> dict[str, str]:
        """The filters as GET parameters (empty ones left out)."""
        return {k: str(v) for k, v in self.to_json().items() if v not in ("", None)}


def last_week(today: date) -> tuple[date, date]:
    """Monday to Sunday of the week before `today`'s."""
    monday = today - timedelta(days=today.weekday())
    return monday - timedelta(days=7), monday - timedelta(days=1)


def _date(raw: str, name: str) -> date:
    try:
        value = date.fromisoformat(raw)
    except ValueError as error:
        raise FilterError(f"{raw!r} is not a date (YYYY-MM-DD)", field=name) from error
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise FilterError(f"{raw!r} is not between {FIRST_YEAR} and {LAST_YEAR}", field=name)
    return value


def _check_text(params: Mapping[str, str]) -> None:
    """Every parameter, used or not: no NUL (PostgreSQL refuses it mid-query), a bounded length."""
    items = params.lists() if hasattr(params, "lists") else ((k, [v]) for k, v in params.items())
    for key, values in items:
        for value in values:
            if not isinstance(value, str):
                continue
            if "\x00" in key or "\x00" in value:
                raise FilterError("must not contain a NUL character", field=key.replace(chr(0), "") or "?")
            if len(value) > MAX_FILTER_LENGTH:
                raise FilterError(f"at most {MAX_FILTER_LENGTH} characters", field=key)


def parse_filters(params: Mapping[str, str], *, today: date) -> ReportFilters:
    """Filters from GET parameters (or a stored export's JSON). Default range: the last 7 days."""
    _check_text(params)
    end = _date(params["end"], "end") if params.get("end") else today
    start = _date(params["start"], "start") if params.get("start") else end - timedelta(days=6)
    if end < start:
        raise RangeError(f"{end} is before start {start}", field="end")
    if (end - start).days > MAX_RANGE_DAYS:
        raise RangeError(f"the range may span at most {MAX_RANGE_DAYS} days", field="start")
    sharing = (params.get("sharing") or "").strip()
    if sharing and sharing not in SHARING_MODES:
        raise FilterError(f"{sharing!r} is not one of {', '.join(SHARING_MODES)}", field="sharing")
    job = params.get("job") or None
    if job is not None:
        try:
            job = int(job)
        except (TypeError, ValueError) as error:
            raise FilterError(f"{job!r} is not a job number", field="job") from error
        if not 0 < job <= MAX_JOB_ID:
            raise FilterError(f"{job} is not a job number", field="job")
    group_by = (params.get("group_by") or "").strip()
    if group_by and group_by not in GROUPS:
        raise FilterError(f"{group_by!r} is not one of {', '.join(GROUPS)}", field="group_by")
    currency = (params.get("currency") or "").strip()
    if currency:
        try:
            currency = check_currency(currency)
        except DomainError as error:
            said = "; ".join(m.removeprefix("currency: ") for ms in error.errors.values() for m in ms)
            raise FilterError(said, field="currency") from None
    return ReportFilters(start=start, end=end, workspace=(params.get("workspace") or "").strip(),
                         queue=(params.get("queue") or "").strip(), gpu_model=(params.get("gpu_model") or "").strip(),
                         sharing=sharing, job=job, group_by=group_by, currency=currency)


def report_workspaces(user) -> QuerySet:
    """The workspaces the user is a member of (any role); none for an anonymous user."""
    if not user.is_authenticated:
        return ChargeLine.workspace.field.related_model.objects.none()
    return user.workspaces.distinct()


def report_rows(user, filters: ReportFilters) -> QuerySet[ChargeLine]:
    """The ledger lines the user may see, filtered. A workspace the user is not in is a 404."""
    visible = report_workspaces(user)
    rows = ChargeLine.objects.filter(workspace__in=visible, day__gte=filters.start, day__lte=filters.end)
    if filters.workspace and not visible.filter(slug=filters.workspace).exists():
        raise Http404("No such workspace")
    return _narrowed(rows, filters)


def _narrowed(rows: QuerySet[ChargeLine], filters: ReportFilters) -> QuerySet[ChargeLine]:
    if filters.workspace:
        rows = rows.filter(workspace__slug=filters.workspace)
    if filters.queue:
        rows = rows.filter(queue=filters.queue)
    if filters.gpu_model:
        rows = rows.filter(gpu_model=filters.gpu_model)
    if filters.sharing:
        rows = rows.filter(sharing=filters.sharing)
    if filters.job is not None:
        rows = rows.filter(job_id=filters.job)
    return rows


@dataclass
class Totals:
    currency: str
    rows: int = 0
    values: dict[str, Decimal] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Decimal:
        if name in SUMMED:
            return self.values.get(name, Decimal(0))
        raise AttributeError(name)


LOST = Decimal("0.0001")
LOST_FIELD = DecimalField(max_digits=14, decimal_places=4)


def lost_gpu_hours() -> Coalesce:
    """A line's GPU-hours lost to evictions (`x_LostGpuHours`): those of its job's replicas evicted on its node
    within the line's time (a replica's last line ends when it was evicted)."""
    lost = (Replica.objects.filter(job_id=OuterRef("job_id"), node__name=OuterRef("node"), lost_gpu_hours__gt=0,
                                   ended__gt=OuterRef("charge_start"), ended__lte=OuterRef("charge_end"))
            .order_by().values("job_id").annotate(total=Sum("lost_gpu_hours")).values("total"))
    return Coalesce(Subquery(lost, output_field=LOST_FIELD), Value(Decimal(0)), output_field=LOST_FIELD)


def with_lost(rows: QuerySet[ChargeLine]) -> QuerySet[ChargeLine]:
    return rows.annotate(lost_gpu_hours=lost_gpu_hours())


def _grouped(rows: QuerySet[ChargeLine], *group: str) -> QuerySet:
    rendered = {name: RENDERED[name] for name in group if name in RENDERED}
    return (rows.order_by().annotate(**rendered, line_lost=lost_gpu_hours()).values(*group)
            .annotate(rows=Count("id"), lost_gpu_hours=Sum("line_lost"), **{k: Sum(k) for k in SUMMED})
            .order_by(*group))


def _exact(value, column: str, currency: str | None) -> Decimal:
    """A column's sum at the column's own precision. Every line is already rounded to it, so this
    only drops what the database added: SQLite sums decimals as floats (1691.26000000001)."""
    if value is None:  # a group with no value of a column sums to NULL
        return Decimal(0)
    if column in MONEY:
        return quantize_money(Decimal(str(value)), currency or "USD")
    return Decimal(str(value)).quantize(_STEP[column])


_STEP = {k: Decimal(1).scaleb(-ChargeLine._meta.get_field(k).decimal_places) for k in SUMMED if k not in MONEY}


def _zero_missing(sums: list[dict]) -> list[dict]:
    for row in sums:
        for k in SUMMED:
            row[k] = _exact(row[k], k, row.get("currency"))
        if "lost_gpu_hours" in row:
            row["lost_gpu_hours"] = Decimal(str(row["lost_gpu_hours"] or 0)).quantize(LOST)
    return sums


def _sums(rows: QuerySet[ChargeLine], *group: str) -> list[dict]:
    # kept under the rows' own query and the grouping: the rows' SQL is compiled once for all of a page's sums
    return ledger_read(rows, lambda: _zero_missing(list(_grouped(rows, *group))), also=("sums", group))


def totals(rows: QuerySet[ChargeLine]) -> list[Totals]:
    """One total per currency (a report normally has one)."""
    return [Totals(currency=r["currency"], rows=r["rows"], values={k: r[k] or Decimal(0) for k in SUMMED})
            for r in _sums(rows, "currency")]


def by_day(rows: QuerySet[ChargeLine]) -> list[dict]:
    return _sums(rows, "day", "currency")


def by_gpu_model(rows: QuerySet[ChargeLine]) -> list[dict]:
    return _sums(rows, "gpu_model", "currency")


def by_workspace(rows: QuerySet[ChargeLine]) -> list[dict]:
    return _sums(rows, "workspace__slug", "workspace__name", "currency")


def by_model_and_sharing(rows: QuerySet[ChargeLine]) -> list[dict]:
    """Compute per GPU model and sharing mode, then stored GiB per storage class."""
    storage = ChargeLine.Resource.STORAGE
    stored = _sums(rows.filter(resource=storage), "sku_id", "currency")
    for row in stored:
        row["resource"], row["storage_class"] = storage, row["sku_id"].removeprefix("storage/")
    return _sums(rows.exclude(resource=storage), "gpu_model", "sharing", "currency") + stored


def savings_by_period(rows: QuerySet[ChargeLine], *, per_workspace: bool = True,
                      within: tuple[date, date] | None = None) -> list[dict]:
    """Per billing month (and workspace): what was billed against the same held time on exclusive whole
    GPUs at the peak, on-demand list price, as a team buying its own would pay. Both sides are sums of
    ledger lines; adjustments count the same on both, so they move neither the saving nor its share.
    `within`: the (first, last) days the rows were filtered to; each row's `first` and `last` are then the
    days of its month it covers, and `whole_month` whether that is all of it."""
    group = ("period", "workspace__slug", "workspace__name", "currency") if per_workspace else ("period", "currency")
    sums = _sums(rows, *group)
    for r in sums:
        if within is not None:
            last_of_month = (r["period"].replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
            r["first"], r["last"] = max(r["period"], within[0]), min(last_of_month, within[1])
            r["whole_month"] = (r["first"], r["last"]) == (r["period"], last_of_month)
        r["saving"] = r["exclusive_cost"] - r["cost"]
        r["saving_percent"] = (r["saving"] * 100 / r["exclusive_cost"]).quantize(Decimal("0.1")) \
            if r["exclusive_cost"] > 0 else None
    return sums


def jobs_of(rows: QuerySet[ChargeLine], *, most_idle: int | None = None) -> list[dict]:
    """Per job: the sums over the range, with the job's frozen estimate and final cost; with `most_idle`,
    only that many jobs, those with the most idle GPU-hours first (the jobs themselves are read for
    those alone)."""
    def per_job() -> list[dict]:
        return _zero_missing(list(_grouped(rows.filter(job__isnull=False), "job_id", "job_name", "queue", "currency")))

    if most_idle is None:
        jobs = ledger_read(rows, per_job, also=("jobs_of",))
    else:  # kept as the few rows shown: a workspace's month can hold thousands of jobs
        jobs = ledger_read(rows, lambda: sorted(per_job(), key=lambda r: r["idle_gpu_hours"], reverse=True)[:most_idle],
                           also=("jobs_of", most_idle))
    from scheduling.models import Job

    info = {j.pk: j for j in Job.objects.filter(pk__in=[r["job_id"] for r in jobs]).only(
        "id", "state", "quote", "final_cost", "currency")}
    for r in jobs:
        job = info.get(r["job_id"])
        quote = (job.quote or {}) if job else {}
        r["state"] = job.state if job else ""
        r["estimate_low"], r["estimate_high"] = quote.get("estimate_low"), quote.get("estimate_high")
        r["final_cost"] = job.final_cost if job else None
    return jobs


def chart_data(rows: QuerySet[ChargeLine], filters: ReportFilters) -> dict:
    """What the charts plot: cost (one series per currency) and GPU-hours for every day of the range
    (zero where nothing ran), and per GPU model. Floats only for drawing, never for money."""
    days = [filters.start + timedelta(days=n) for n in range((filters.end - filters.start).days + 1)]
    cost: dict[str, dict[date, float]] = {}
    hours: dict[date, list[float]] = {}
    for d in by_day(rows):
        cost.setdefault(d["currency"], {})[d["day"]] = float(d["cost"] or 0)
        day_hours = hours.setdefault(d["day"], [0.0, 0.0])
        day_hours[0] += float(d["allocated_gpu_hours"] or 0)
        day_hours[1] += float(d["used_gpu_hours"] or 0)
    model_rows = by_gpu_model(rows)
    models = sorted({m["gpu_model"] for m in model_rows})
    model_cost: dict[str, dict[str, float]] = {}
    model_hours = dict.fromkeys(models, 0.0)
    for m in model_rows:
        model_cost.setdefault(m["currency"], {})[m["gpu_model"]] = float(m["cost"] or 0)
        model_hours[m["gpu_model"]] += float(m["allocated_gpu_hours"] or 0)
    return {
        "days": [day.isoformat() for day in days],
        "costs": [{"currency": c, "cost": [cost[c].get(day, 0.0) for day in days],
                   "model_cost": [model_cost.get(c, {}).get(m, 0.0) for m in models]} for c in sorted(cost)],
        "allocated": [(hours.get(day) or [0.0, 0.0])[0] for day in days],
        "used": [(hours.get(day) or [0.0, 0.0])[1] for day in days],
        "models": models, "model_hours": [model_hours[m] for m in models],
    }


def choices(user) -> dict[str, list[str]]:
    """Values for the filter drop-downs, from what the user may see."""
    rows = ChargeLine.objects.filter(workspace__in=report_workspaces(user)).order_by()

    def distinct(column: str) -> list[str]:
        return sorted(set(rows.values_list(column, flat=True).distinct()) - {""})

    return {"queues": ledger_read(rows, lambda: distinct("queue"), also=("distinct", "queue")),
            "gpu_models": ledger_read(rows, lambda: distinct("gpu_model"), also=("distinct", "gpu_model")),
            "sharing": list(SHARING_MODES)}


def get_report_workspace(user, slug: str):
    workspace = report_workspaces(user).filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace")
    return workspace


@dataclass(frozen=True)
class Statement:
    """A workspace's month: its usage lines by GPU model and sharing mode, its adjustments, and the
    opening (everything billed before the month) and closing figures."""

    workspace: Any  # the portal's Workspace
    month: date
    currency: str
    lines: list[dict]  # usage per GPU model and sharing mode
    adjustments: list[ChargeLine]
    total: Decimal
    opening: Decimal
    as_of: datetime | None
    closed: Any  # billing.models.ClosedPeriod | None
    usage: Totals | None

    @property
    def closing(self) -> Decimal:
        return self.opening + self.total

    @property
    def saved(self) -> Decimal:
        """Sharing and discounts against the same held time on whole GPUs at the on-demand price."""
        return (self.usage.exclusive_cost - self.usage.cost) if self.usage else Decimal(0)


def parse_month(raw: str) -> date:
    try:
        return periods.parse_month(raw)
    except periods.MonthError as error:
        raise FilterError(str(error), field="month") from error


def monthly_statement(user, slug: str, month: date) -> Statement:
    workspace = get_report_workspace(user, slug)
    lines = ChargeLine.objects.filter(workspace=workspace)
    month_lines = lines.filter(period=month)
    usage = month_lines.filter(category=ChargeLine.Category.USAGE)
    usage_totals = totals(usage)
    currency = workspace_currency(workspace, month)  # a month has one currency
    return Statement(
        workspace=workspace, month=month, currency=currency,
        lines=by_model_and_sharing(usage), adjustments=list(month_lines.exclude(category=ChargeLine.Category.USAGE)
                                                            .select_related("author").order_by("hour", "id")),
        # the opening balance counts the earlier months billed in this currency
        total=money_sum(month_lines), opening=money_sum(lines.filter(period__lt=month), currency),
        as_of=as_of(month_lines), closed=workspace.closed_periods.filter(period=month).first(),
        usage=usage_totals[0] if usage_totals else None,
    )


@dataclass(frozen=True)
class Costs:
    """What /api/v1/costs/ answers: the whole period's total per currency, and one page of grouped rows
    (a group billed in two currencies is two rows)."""

    totals: list[tuple[str, Decimal]]  # (currency, total), by currency code; never empty
    as_of: datetime | None
    rows: list[dict]
    count: int
    group_by: str

    @property
    def currency(self) -> str | None:
        """The one currency of every line, or None when the lines are in several."""
        return self.totals[0][0] if len(self.totals) == 1 else None

    @property
    def total(self) -> Decimal | None:
        return self.totals[0][1] if len(self.totals) == 1 else None


def _no_lines_currencies(user, filters: ReportFilters) -> list[str]:
    """The currencies a report with no line is in: those its workspaces bill in now."""
    visible = report_workspaces(user)
    if filters.workspace:
        visible = visible.filter(slug=filters.workspace)
    return sorted(set(workspace_currencies(visible).values())) or [default_currency()]


def costs(user, filters: ReportFilters, *, page: int = 1, page_size: int | None = MAX_PAGE_ROWS) -> Costs:
    """Costs of the lines the user may see, grouped by `filters.group_by` (day by default) and currency;
    one page of `page_size` groups, or all of them when it is None. Totals are per currency; with
    `filters.currency`, every row and the one total are consolidated into it (a missing rate: MissingRate).
    group_by=user reads the lines of user_report_workspaces and adds each person's job count and idle share."""
    if filters.group_by == "user":
        return _per_person(user, filters, page=page, page_size=page_size)
    rows = report_rows(user, filters)
    group = (*GROUPS[filters.group_by or "day"], "currency")
    grouped = _grouped(rows, *group)
    if filters.currency:
        return _consolidated(rows, grouped, group, filters, page=page, page_size=page_size)
    count = grouped.count()
    if page_size is not None:
        first = (page - 1) * page_size
        grouped = grouped[first:first + page_size]
    page_rows = _zero_missing(list(grouped))
    sums = sums_by_currency(rows) or [(c, quantize_money(Decimal(0), c)) for c in _no_lines_currencies(user, filters)]
    return Costs(totals=sums, as_of=as_of(rows), rows=page_rows, count=count, group_by=filters.group_by or "day")


def _consolidated(rows, grouped, group, filters: ReportFilters, *, page: int, page_size: int | None) -> Costs:
    """Every group converted (a total is the sum of all of them), then one page of them."""
    keys = group[:-1]
    rendered = {name: RENDERED[name] for name in keys if name in RENDERED}
    converted = consolidation.convert_groups(rows, keys, filters.currency, rendered=rendered)
    all_rows = consolidation.consolidate_rows(_zero_missing(list(grouped)), converted, keys, filters.currency)
    shown = all_rows if page_size is None else all_rows[(page - 1) * page_size:page * page_size]
    return Costs(totals=consolidation.total_of(all_rows, filters.currency), as_of=as_of(rows), rows=shown,
                 count=len(all_rows), group_by=filters.group_by or "day")


def _per_person(user, filters: ReportFilters, *, page: int, page_size: int | None) -> Costs:
    """Per person and month: the sums of each person's own lines, plus their share of their workspaces'
    idle-share lines (person_idle_shares), which `cost` includes and `idle_share` shows. So the rows still
    add up to the total of every line, idle-share lines included."""
    rows = user_report_rows(user, filters)
    idle_lines = rows.filter(charge_kind=IDLE_SHARE)
    own = rows.exclude(charge_kind=IDLE_SHARE)
    group = (*GROUPS["user"], "currency")
    all_rows = _zero_missing(list(_grouped(own, *group).annotate(jobs=Count("job_id", distinct=True))))
    if filters.currency:
        keys = group[:-1]
        converted = consolidation.convert_groups(own, keys, filters.currency,
                                                 rendered={name: RENDERED[name] for name in keys if name in RENDERED})
        all_rows = consolidation.consolidate_rows(all_rows, converted, keys, filters.currency)
    all_rows = _with_idle_shares(all_rows, person_idle_shares(idle_lines, filters.currency), filters.currency)
    shown = all_rows if page_size is None else all_rows[(page - 1) * page_size:page * page_size]
    if filters.currency:
        sums = consolidation.total_of(all_rows, filters.currency)
    else:
        sums = sums_by_currency(rows) or [(c, quantize_money(Decimal(0), c))
                                          for c in _no_lines_currencies(user, filters)]
    return Costs(totals=sums, as_of=as_of(rows), rows=shown, count=len(all_rows), group_by="user")


@dataclass
class IdleShare:
    """A person's share of idle-share lines in one billing month and currency: in the report's currency
    (`amount`), and as it was billed (`original`, `currency`), with the rate(s) between."""

    amount: Decimal = Decimal(0)
    original: Decimal = Decimal(0)
    rates: set = field(default_factory=set)


def person_idle_shares(idle_lines: QuerySet[ChargeLine], target: str = "") -> dict[tuple[str, date, str], IdleShare]:
    """{(person, billing month, line currency): their share}. Each workspace's idle-share lines of a month are
    split among its people by each person's allocated GPU-hours in that workspace and month (all of its lines,
    whatever the report's range), in minor units by largest remainders, so the people's shares add up to the
    lines exactly. With no GPU-hours by anyone, the share stays with no one: person "". With `target`, each
    line is converted (rounded once, as consolidation does) and the converted sum is split the same way."""
    book = consolidation.rate_book(idle_lines, target) if target else None
    chosen = exchange_rates.rule() if target else None
    charged: dict[tuple[int, date, str], IdleShare] = {}
    for workspace_id, period, currency, day, cost in (idle_lines.order_by("id").values_list(
            "workspace_id", "period", "currency", "day", "cost")):
        acc = charged.setdefault((workspace_id, period, currency), IdleShare())
        acc.original += cost
        if book is not None:
            rate = book.rate(currency, exchange_rates.rate_day(day, period, chosen=chosen))
            acc.amount += quantize_money(cost * rate, target)
            acc.rates.add(rate)
        else:
            acc.amount += cost
    if not charged:
        return {}
    hours: dict[tuple[int, date], dict[str, Decimal]] = {}
    held = (ChargeLine.objects.filter(workspace_id__in={k[0] for k in charged}, period__in={k[1] for k in charged})
            .exclude(charge_kind=IDLE_SHARE).order_by().annotate(person=RENDERED["submitted_by"])
            .values("workspace_id", "period", "person").annotate(hours=Sum("allocated_gpu_hours")))
    for row in held:
        gpu_hours = Decimal(str(row["hours"] or 0))
        if row["person"] and gpu_hours > 0:
            hours.setdefault((row["workspace_id"], row["period"]), {})[row["person"]] = gpu_hours
    out: dict[tuple[str, date, str], IdleShare] = {}
    for (workspace_id, period, currency), acc in sorted(charged.items()):
        weights = hours.get((workspace_id, period)) or {"": Decimal(1)}
        amounts = split(acc.amount, weights, target or currency)
        originals = split(acc.original, weights, currency) if target else amounts
        for person in weights:
            share = out.setdefault((person, period, currency), IdleShare())
            share.amount += amounts[person]
            share.original += originals[person]
            share.rates |= acc.rates
    return out


def _with_idle_shares(rows: list[dict], shares: dict[tuple[str, date, str], IdleShare], target: str = "") -> list[dict]:
    """Each per-person row with its idle share added to its cost (and original cost); a person with a share
    and no line of their own in the range gets a row of their share alone."""
    by_key = {(r["submitted_by"] or "", r["period"], r.get("x_OriginalCurrency", r["currency"])): r for r in rows}
    for row in rows:
        row["idle_share"] = Decimal(0)
    added = False
    for key, share in shares.items():
        row = by_key.get(key)
        if row is None:
            row = by_key[key] = _share_only_row(*key, share, target)
            rows.append(row)
            added = True
        row["idle_share"] += share.amount
        row["cost"] += share.amount
        if target:
            row["x_OriginalCost"] += share.original
    if added:
        rows.sort(key=lambda r: (r["submitted_by"] or "", r["period"], r.get("x_OriginalCurrency", r["currency"])))
    return rows


def _share_only_row(person: str, period: date, currency: str, share: IdleShare, target: str) -> dict:
    row = {"submitted_by": person, "period": period, "currency": target or currency, "rows": 0, "jobs": 0,
           "lost_gpu_hours": Decimal(0).quantize(LOST), "idle_share": Decimal(0),
           **{k: _exact(0, k, target or currency) for k in SUMMED}}
    if target:
        row.update({"x_OriginalCost": Decimal(0), "x_OriginalCurrency": currency,
                    "x_ExchangeRate": next(iter(share.rates)) if len(share.rates) == 1 else None})
    return row


def user_report_workspaces(user) -> QuerySet:
    """The workspaces whose per-person costs the user may read: every one for an operator (staff); for anyone
    else those where they are finance or an owner. A member or viewer reads their own lines only
    (own_usage), never their colleagues'."""
    workspaces = ChargeLine.workspace.field.related_model.objects
    if not user.is_authenticated:
        return workspaces.none()
    if user.is_staff:
        return workspaces.all()
    return workspaces.filter(memberships__user=user, memberships__role__in=FINANCE_ROLES).distinct()


FINANCE_ROLES = ("finance", "owner")


class NotFinance(DomainError):
    status = 403
    title = "Not allowed"
    field = "group_by"


def user_report_rows(user, filters: ReportFilters) -> QuerySet[ChargeLine]:
    """The lines of a per-person report. Across workspaces: those of user_report_workspaces, refused (403) to
    someone who is finance or owner nowhere. Inside one named workspace: any member's, as every grouping of
    it (a workspace the user is not in is a 404; an operator may name any)."""
    if filters.workspace and not user.is_staff:
        return report_rows(user, filters)
    allowed = user_report_workspaces(user)
    if not allowed.exists():
        raise NotFinance("costs per person across workspaces are for finance, owners and operators: name one "
                         "workspace of yours, or see your own usage on your account page")
    rows = ChargeLine.objects.filter(workspace__in=allowed, day__gte=filters.start, day__lte=filters.end)
    return _narrowed(rows, filters)


def own_usage(user, *, months: int = 12, today: date) -> list[dict]:
    """A person's own lines (jobs they submitted) of their workspaces, per billing month and currency:
    GPU-hours, cost and job count, the latest `months` months first; `cost` includes their idle share
    (person_idle_shares, as the per-person report), which `idle_share` shows."""
    first = (today.replace(day=1) - timedelta(days=31 * (months - 1))).replace(day=1)
    mine = ChargeLine.objects.filter(workspace__in=report_workspaces(user), period__gte=first)
    rows = mine.filter(job__submitted_by=user).exclude(charge_kind=IDLE_SHARE)
    query = (rows.order_by().values("period", "currency")
             .annotate(gpu_hours=Sum("allocated_gpu_hours"), cost=Sum("cost"), jobs=Count("job_id", distinct=True))
             .order_by("-period", "currency"))
    shares = person_idle_shares(mine.filter(charge_kind=IDLE_SHARE))
    out = []
    for r in query:
        share = shares.get((user.username, r["period"], r["currency"]))
        idle = share.amount if share else Decimal(0)
        out.append({**r, "gpu_hours": Decimal(str(r["gpu_hours"] or 0)).quantize(QUANTITY), "idle_share": idle,
                    "cost": quantize_money(Decimal(str(r["cost"] or 0)), r["currency"]) + idle})
    return out


USER_COLUMNS = ("user", "month", "gpu_hours", "cost", "idle_share", "jobs", "currency")
CONSOLIDATED_COLUMNS = ("x_OriginalCost", "x_OriginalCurrency", "x_ExchangeRate")


@dataclass(frozen=True)
class UserReport:
    """GPU-hours, cost, idle share and jobs per person and billing month (a person billed in two currencies
    and no reporting currency: a row per currency), the top users and the totals per currency."""

    rows: list[dict]
    top: list[dict]
    totals: list[tuple[str, Decimal]]
    consolidated: bool

    @property
    def header(self) -> list[str]:
        return [*USER_COLUMNS, *(CONSOLIDATED_COLUMNS if self.consolidated else ())]

    def table(self) -> list[list[str]]:
        """The rows as export cells: money with the currency's decimals, GPU-hours to the QUANTITY."""
        out = []
        for row in self.rows:
            cells = [row["user"], row["month"], str(row["gpu_hours"]), str(quantize_money(row["cost"], row["currency"])),
                     str(quantize_money(row["idle_share"], row["currency"])), str(row["jobs"]), row["currency"]]
            if self.consolidated:
                cells += [str(quantize_money(row["x_OriginalCost"], row["x_OriginalCurrency"])),
                          row["x_OriginalCurrency"], "" if row["x_ExchangeRate"] is None else str(row["x_ExchangeRate"])]
            out.append(cells)
        return out


def user_report(user, filters: ReportFilters, *, top: int = 10) -> UserReport:
    """Per person and month across the workspaces user_report_workspaces allows (sreport's
    UserUtilizationByAccount): every figure a sum of the people's lines, as the costs API's group_by=user."""
    report = costs(user, replace(filters, group_by="user"), page_size=None)
    rows = [{"user": r["submitted_by"] or "", "month": f"{r['period']:%Y-%m}",
             "gpu_hours": r["allocated_gpu_hours"].quantize(QUANTITY), "cost": r["cost"],
             "idle_share": r["idle_share"], "jobs": r["jobs"], "currency": r["currency"],
             **{k: r[k] for k in CONSOLIDATED_COLUMNS if k in r}} for r in report.rows]
    people: dict[tuple[str, str], dict] = {}
    for r in rows:
        person = people.setdefault((r["user"], r["currency"]), {"user": r["user"], "currency": r["currency"],
                                                                "gpu_hours": Decimal(0), "cost": Decimal(0), "jobs": 0})
        person["gpu_hours"] += r["gpu_hours"]
        person["cost"] += r["cost"]
        person["jobs"] += r["jobs"]
    ranked = sorted(people.values(), key=lambda p: (-p["cost"], -p["gpu_hours"], p["user"]))[:top]
    return UserReport(rows=rows, top=ranked, totals=report.totals, consolidated=bool(filters.currency))
