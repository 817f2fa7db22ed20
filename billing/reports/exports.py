"""Cost exports a finance team can load as they are: one row per ledger line, in FinOps FOCUS
columns plus the platform's own (x_-prefixed); UTF-8 CSV streamed from an async iterator, Excel
written in constant memory. Money has the currency's fixed decimals, times are ISO 8601 UTC, and
the rows add up exactly to the costs API's total (both are sums of the same stored lines).
The columns are a data contract and stay English; the Excel file's sheet names and the labels of its
Totals sheet are for people, in the active language.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from itertools import islice
from pathlib import Path

import xlsxwriter
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.utils.translation import pgettext

from billing import pricing
from billing.accounts import accounts_by_workspace
from billing.chargeback import IDLE_SHARE
from billing.exchange_rates import RateBook, rate_day, rule
from billing.ledger.periods import period_bounds
from billing.models import BillingAccount
from billing.pricing.rules import HOURS_PER_MONTH
from billing.reports.consolidation import rate_book
from billing.reports.selectors import with_lost
from scheduling.api import kinds, service_usage

log = logging.getLogger(__name__)

# What each exported line is read from: the ledger line's columns, once, in this order. The submitter is
# its job's user's name as it is now (an anonymised user's pseudonym); the line's stored `submitter` only
# for a line without a job's user.
LINE_FIELDS = (
    "id", "category", "charge_start", "charge_end", "period", "workspace__slug", "workspace__name", "queue",
    "job_id", "job_name", "job__kind", "submitter", "pool", "node", "vendor", "gpu_model", "sharing", "slice",
    "sku_id", "price_table_id", "offpeak", "spot", "list_unit_price", "allocated_gpu_hours", "used_gpu_hours",
    "idle_gpu_hours", "exclusive_gpu_hours", "cpu_core_hours", "memory_gib_hours", "exclusive_cost", "list_cost",
    "cost", "currency", "provisional", "reason", "author__username", "resource", "resource_name", "storage_gib_hours",
    "job__submitted_by__username", "charge_kind", "workspace_id", "day",
    "lost_gpu_hours",   # annotated (reports.selectors.with_lost)
)
# FinOps FOCUS columns (every column FOCUS 1.0 makes mandatory), then the platform's own, x_-prefixed.
HEADER = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName",
    "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName",
    "Tags",
    "x_JobId", "x_JobName", "x_Submitter", "x_Pool", "x_Node", "x_GpuModel", "x_SharingMode", "x_Slice",
    "x_AllocatedGpuHours", "x_UsedGpuHours", "x_IdleGpuHours", "x_ExclusiveGpuHours", "x_CpuCoreHours",
    "x_MemoryGibHours", "x_StorageGibHours", "x_ExclusiveCost", "x_Discounts", "x_DiscountAmount", "x_SharingSaving",
    "x_Provisional", "x_Reason", "x_Author",
    "x_LostGpuHours", "x_PromptTokens", "x_CompletionTokens", "x_ChargeKind",
    "x_OriginalCost", "x_OriginalCurrency", "x_ExchangeRate",  # filled when consolidated into another currency
]
MONEY_COLUMNS = frozenset({"BilledCost", "ContractedCost", "EffectiveCost", "ListCost", "x_ExclusiveCost",
                           "x_DiscountAmount", "x_SharingSaving"})
NUMBER_COLUMNS = MONEY_COLUMNS | {"ConsumedQuantity", "ContractedUnitPrice", "ListUnitPrice", "PricingQuantity",
                                  "x_JobId", "x_AllocatedGpuHours", "x_UsedGpuHours", "x_IdleGpuHours",
                                  "x_ExclusiveGpuHours", "x_CpuCoreHours", "x_MemoryGibHours", "x_StorageGibHours",
                                  "x_LostGpuHours", "x_PromptTokens", "x_CompletionTokens", "x_OriginalCost",
                                  "x_ExchangeRate"}
QUANTITY = Decimal("0.000001")
UNIT_PRICE = Decimal("0.0001")  # a unit price as the ledger stores it (ChargeLine.list_unit_price)
SHARE = "Share"  # the pricing unit of an idle share (chargeback): one, whole
UNIT_PRICE_PLACES = (4, 6, 8, 10, 12)  # an exported unit price's decimals: the fewest that make the line's cost
LOST = Decimal("0.0001")   # GPU-hours lost to evictions, as the replicas record them
GROUP_SUMS = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "exclusive_gpu_hours", "cpu_core_hours",
              "memory_gib_hours", "storage_gib_hours", "list_cost", "exclusive_cost", "cost")
STORAGE = "storage"  # ChargeLine.Resource.STORAGE
EXCEL_MAX_ROWS = 1_048_576  # per sheet, header included
CSV_CHUNK_ROWS = 2000


def _resource_type(kind_name: str | None) -> str:
    """The FOCUS ResourceType of a line's job: its kind's (none for a line without a job)."""
    kind = kinds.find(kind_name)
    return kind.resource_type if kind is not None else ""


def _iso(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at else ""


def _qty(value: Decimal | None) -> str:
    return str(Decimal(value or 0).quantize(QUANTITY))


def _discounts(offpeak: bool, spot: bool, sharing: str) -> str:
    kinds = [k for k, on in (("off-peak", offpeak), ("spot", spot), ("share", sharing not in ("", "exclusive")))
             if on]
    return ";".join(kinds)


def account_columns(f: dict, account: BillingAccount | None) -> dict[str, str]:
    """FOCUS BillingAccount* and SubAccount* of a line of a workspace paid for by `account` (None: by no
    account). No account: the workspace and its queue, as before accounts existed. A top-level account:
    the account and the workspace. A sub-account: the account above it and the sub-account."""
    if account is None:
        return {"BillingAccountId": f["workspace__slug"], "BillingAccountName": f["workspace__name"],
                "SubAccountId": f["queue"], "SubAccountName": f["queue"]}
    top = account.parent or account
    sub_id, sub_name = ((account.slug, account.name) if account.parent_id
                        else (f["workspace__slug"], f["workspace__name"]))
    return {"BillingAccountId": top.slug, "BillingAccountName": top.name, "SubAccountId": sub_id,
            "SubAccountName": sub_name}


def focus_row(line: Sequence, tokens: tuple[int, int] | None = None, account: BillingAccount | None = None,
              book: RateBook | None = None) -> list[str]:
    """One ledger line as an export row: every value a string (money with the currency's decimals,
    times ISO 8601 UTC), so CSV and XLSX carry exactly what the ledger stores. `tokens`: the prompt and
    completion tokens an inference service's line carries (`line_tokens`); blank for other lines.
    `account`: the billing account of the line's workspace (account_columns). `book`: consolidate into its
    currency (billing.reports.consolidation): every amount converted and rounded once, the line's own cost,
    currency and rate in x_OriginalCost, x_OriginalCurrency and x_ExchangeRate."""
    f = dict(zip(LINE_FIELDS, line, strict=True))
    f["submitter"] = f["job__submitted_by__username"] or f["submitter"]
    original = currency = f["currency"]
    rate = None
    if book is not None:
        rate = book.rate(original, rate_day(f["day"], f["period"]))
        currency = book.target
        f["list_unit_price"] = (Decimal(f["list_unit_price"]) * rate).quantize(UNIT_PRICE)

    def amount(value) -> Decimal:
        value = Decimal(value or 0)
        return pricing.quantize_money(value * rate if rate is not None else value, currency)

    def money(value) -> str:
        return str(amount(value))

    period_start, period_end = period_bounds(f["period"])
    usage = f["category"] == "Usage"
    sku_price = (f"pt{f['price_table_id']}:{f['sku_id'] or 'cpu'}:{'offpeak' if f['offpeak'] else 'peak'}:"
                 f"{'spot' if f['spot'] else 'ondemand'}") if usage else ""
    unit, quantity = _pricing_quantity(f) if usage else ("", "")
    unit_price = _unit_price(amount(f["list_cost"]), quantity, currency, f["list_unit_price"]) if usage else ""
    description = (f"{f['job_name']}: {f['slice']} on {f['node']}" + (" (off-peak)" if f["offpeak"] else "")
                   if usage and not f["charge_kind"] else f["reason"])
    tagged = (("queue", f["queue"]), ("pool", f["pool"]), ("sharing", f["sharing"]), ("submitter", f["submitter"]),
              ("workspace", f["workspace__slug"] if account is not None else ""))  # the columns no longer name it
    tags = json.dumps({k: v for k, v in tagged if v}, sort_keys=True)
    name = settings.PLATFORM_NAME
    values = {
        "BilledCost": money(f["cost"]), **account_columns(f, account), "BillingCurrency": currency,
        "BillingPeriodEnd": _iso(period_end), "BillingPeriodStart": _iso(period_start),
        "ChargeCategory": f["category"], "ChargeClass": "" if usage else "Correction",
        "ChargeDescription": description, "ChargeFrequency": "Usage-Based" if usage else "One-Time",
        "ChargePeriodEnd": _iso(f["charge_end"]), "ChargePeriodStart": _iso(f["charge_start"]),
        "ConsumedQuantity": quantity if unit != SHARE else "", "ConsumedUnit": unit if unit != SHARE else "",
        "ContractedCost": money(f["list_cost"]), "ContractedUnitPrice": unit_price,
        "EffectiveCost": money(f["cost"]), "InvoiceIssuerName": name, "ListCost": money(f["list_cost"]),
        "ListUnitPrice": unit_price,
        "PricingCategory": ("Dynamic" if f["spot"] else "Standard") if usage else "",
        "PricingQuantity": quantity, "PricingUnit": unit, "ProviderName": name,
        "PublisherName": name, "RegionId": settings.PLATFORM_REGION, "RegionName": settings.PLATFORM_REGION,
        "ResourceId": f"job/{f['job_id']}/{f['node']}" if f["job_id"] else "",
        "ResourceName": f["job_name"], "ResourceType": _resource_type(f["job__kind"]) if f["job_id"] else "",
        "ServiceCategory": "AI and Machine Learning", "ServiceName": name,
        "SkuId": f["sku_id"], "SkuPriceId": sku_price,
        "Tags": tags,
        "x_JobId": str(f["job_id"] or ""), "x_JobName": f["job_name"], "x_Submitter": f["submitter"],
        "x_Pool": f["pool"], "x_Node": f["node"], "x_GpuModel": f["gpu_model"], "x_SharingMode": f["sharing"],
        "x_Slice": f["slice"], "x_AllocatedGpuHours": _qty(f["allocated_gpu_hours"]),
        "x_UsedGpuHours": _qty(f["used_gpu_hours"]), "x_IdleGpuHours": _qty(f["idle_gpu_hours"]),
        "x_ExclusiveGpuHours": _qty(f["exclusive_gpu_hours"]), "x_CpuCoreHours": _qty(f["cpu_core_hours"]),
        "x_MemoryGibHours": _qty(f["memory_gib_hours"]), "x_ExclusiveCost": money(f["exclusive_cost"]),
        "x_Discounts": _discounts(f["offpeak"], f["spot"], f["sharing"]) if usage else "",
        "x_DiscountAmount": str(amount(f["list_cost"]) - amount(f["cost"])),
        "x_SharingSaving": str(amount(f["exclusive_cost"]) - amount(f["list_cost"])),
        "x_Provisional": "true" if f["provisional"] else "false", "x_Reason": f["reason"],
        "x_Author": f["author__username"] or "", "x_StorageGibHours": _qty(f["storage_gib_hours"]),
        "x_LostGpuHours": str(Decimal(str(f["lost_gpu_hours"] or 0)).quantize(LOST)) if usage else "",
        "x_PromptTokens": "" if tokens is None else str(tokens[0]),
        "x_CompletionTokens": "" if tokens is None else str(tokens[1]),
        "x_ChargeKind": f["charge_kind"] or ("usage" if usage else ""),
        "x_OriginalCost": "" if rate is None else str(pricing.quantize_money(Decimal(f["cost"] or 0), original)),
        "x_OriginalCurrency": "" if rate is None else original, "x_ExchangeRate": "" if rate is None else str(rate),
    }
    if usage and f["resource"] == STORAGE:
        values.update(_storage_values(f, amount(f["list_cost"]), currency))
    return [values[h] for h in HEADER]


def _pricing_quantity(f: dict) -> tuple[str, str]:
    """A compute line's (unit, quantity): the GPU-hours it held, or for a line without GPUs its core-hours
    (without cores, its memory's GiB-hours); a chargeback's idle share is one share of its pool's idle capacity."""
    if f["charge_kind"] == IDLE_SHARE:
        return SHARE, _qty(1)
    for unit, name in (("GPU-Hours", "allocated_gpu_hours"), ("Core-Hours", "cpu_core_hours"),
                       ("GiB-Hours", "memory_gib_hours")):
        if Decimal(f[name] or 0):
            return unit, _qty(f[name])
    return "GPU-Hours", _qty(0)


def _unit_price(cost: Decimal, quantity: str, currency: str, listed) -> str:
    """The line's price of one pricing unit: what, times the quantity, gives the line's list cost (rounded to
    the currency's minor unit, as the ledger rounded it once), so FOCUS's ListCost = ListUnitPrice x
    PricingQuantity holds. `listed`, the price table's price the ledger stored, when it does; else the
    line's own (a compute line's price per GPU-hour then includes the cores and memory the slice held with
    it), with the fewest decimals (from four) that make the cost. No quantity: no price."""
    held = Decimal(quantity)
    if not held:
        return str(Decimal(0).quantize(UNIT_PRICE)) if not cost else ""
    listed = Decimal(listed or 0)
    if listed and pricing.quantize_money(listed * held, currency) == cost:
        return str(listed)
    exact = cost / held
    for places in UNIT_PRICE_PLACES:
        price = exact.quantize(Decimal(1).scaleb(-places))
        if pricing.quantize_money(price * held, currency) == cost:
            return str(price)
    return str(exact)


def _storage_values(f: dict, list_cost: Decimal, currency: str) -> dict[str, str]:
    """A storage line's own columns: used GiB-hours consumed, priced per GiB-month of its class."""
    gib_hours = Decimal(f["storage_gib_hours"] or 0)
    months = _qty(gib_hours / HOURS_PER_MONTH)
    per_gib_month = _unit_price(list_cost, months, currency, f["list_unit_price"])
    return {
        "ChargeDescription": f"{f['resource_name']}: {_qty(gib_hours)} GiB-hours used ({f['sku_id']})",
        "ConsumedQuantity": _qty(gib_hours), "ConsumedUnit": "GiB-Hours",
        "PricingQuantity": months, "PricingUnit": "GiB-Months",
        "ListUnitPrice": per_gib_month, "ContractedUnitPrice": per_gib_month, "PricingCategory": "Standard",
        "ResourceId": f"{f['workspace__slug']}/{f['resource_name']}", "ResourceName": f["resource_name"],
        "ResourceType": "Volume", "ServiceCategory": "Storage",
        "SkuPriceId": f"pt{f['price_table_id']}:{f['sku_id']}", "x_Discounts": "",
    }


def line_rows(queryset, *, chunk_size: int | None = None, currency: str = "") -> Iterator[list[str]]:
    """The export rows of a ChargeLine queryset, read `chunk_size` lines at a time (and the tokens of the
    inference services among them, one query per chunk); with `currency`, consolidated into it (the rates
    are read, and a missing one raised as MissingRate, before the first row)."""
    size = chunk_size or CSV_CHUNK_ROWS
    book = rate_book(queryset, currency) if currency else None
    if book is not None:
        _check_rates(queryset, book)
    return _line_rows(queryset, size, book)


def _check_rates(queryset, book: RateBook) -> None:
    """Every rate the lines need, found now: a stream must not fail half-written."""
    chosen = rule()
    for currency, day, period in queryset.order_by().values_list("currency", "day", "period").distinct():
        book.rate(currency, rate_day(day, period, chosen=chosen))


def _line_rows(queryset, size: int, book: RateBook | None) -> Iterator[list[str]]:
    lines = with_lost(queryset).order_by("hour", "workspace_id", "job_id", "id").values_list(*LINE_FIELDS).iterator(size)
    carried: set[tuple[int, datetime]] = set()
    while chunk := list(islice(lines, size)):
        accounts = accounts_by_workspace({line[_WORKSPACE] for line in chunk})
        for line, tokens in zip(chunk, line_tokens(chunk, carried), strict=True):
            yield focus_row(line, tokens, accounts.get(line[_WORKSPACE]), book)
        last_hour = chunk[-1][_START].replace(minute=0, second=0, microsecond=0)
        carried = {pair for pair in carried if pair[1] >= last_hour}   # lines come hour by hour


SERVICE_KINDS = frozenset(kinds.autoscaled())
_JOB, _KIND, _START, _CATEGORY, _WORKSPACE = (LINE_FIELDS.index(n) for n in ("job_id", "job__kind", "charge_start",
                                                                           "category", "workspace_id"))


def line_tokens(chunk: Sequence[Sequence], carried: set[tuple[int, datetime]]) -> list[tuple[int, int] | None]:
    """Per line, the (prompt, completion) tokens it carries: an inference service's usage line carries the
    tokens its service answered in the line's hour, the first line of that service and hour all of them and
    the others (other nodes, prices) none, so the column adds up to the tokens served; None for other lines.
    `carried`: the (service, hour) pairs already given, across chunks."""
    def key(line):
        start = line[_START]
        return line[_JOB], start.replace(minute=0, second=0, microsecond=0)

    metered = [line[_KIND] in SERVICE_KINDS and line[_CATEGORY] == "Usage" and line[_JOB] for line in chunk]
    served = service_usage.tokens_by_hour(key(line) for line, on in zip(chunk, metered, strict=True) if on)
    out: list[tuple[int, int] | None] = []
    for line, on in zip(chunk, metered, strict=True):
        if not on:
            out.append(None)
            continue
        pair = key(line)
        out.append((0, 0) if pair in carried else served.get(pair, (0, 0)))
        carried.add(pair)
    return out


GROUPED_HEADER_NAMES = {"submitted_by": "submitter"}  # the CSV's column names as they always were


def grouped_header(columns: Sequence[str]) -> list[str]:
    return [*(GROUPED_HEADER_NAMES.get(c, c) for c in columns), *GROUP_SUMS, "currency"]


def grouped_rows(rows: Iterable[dict], columns: Sequence[str]) -> Iterator[list[str]]:
    """Rows of the costs selector's grouping (each in one currency, its own column), with the same
    fixed decimals as the API."""
    for row in rows:
        currency = row["currency"]
        yield [str(row[c]) if row[c] is not None else "" for c in columns] + [
            str(pricing.quantize_money(row[k], currency)) if k.endswith("cost") else _qty(row[k])
            for k in GROUP_SUMS] + [currency]


async def aiter_rows(rows: Iterable[Sequence], *, chunk_size: int | None = None) -> AsyncIterator[Sequence]:
    """Rows of a blocking iterable for async code: each chunk is pulled by one call into the
    database thread, so one chunk is held at a time. (QuerySet.aiterator() runs a values_list
    query eagerly in the event loop, which Django forbids.)"""
    chunk_size = chunk_size or CSV_CHUNK_ROWS
    source = iter(rows)  # a generator: nothing runs until the first pull

    def pull() -> list:
        try:
            return list(islice(source, chunk_size))
        except Exception:
            # In the database thread: hand the connection back now, the stream will not finish.
            for conn in connections.all(initialized_only=True):
                conn.close()
            raise

    take = sync_to_async(pull)
    while True:
        chunk = await take()
        for row in chunk:
            yield row
        if len(chunk) < chunk_size:
            return


# --------------------------------------------------------------------------- spreadsheet-safe CSV

# A cell a spreadsheet would read as a formula (OWASP's list): `=HYPERLINK(...)` in an adjustment's reason
# must stay text when a finance team opens the file.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
# The columns of every CSV export that hold numbers (a negative amount stays a number there).
CSV_NUMBER_COLUMNS = frozenset(NUMBER_COLUMNS | set(GROUP_SUMS))


def spreadsheet_safe(value):
    """Text that a spreadsheet would read as a formula, with a quote in front so it reads as text."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


class SafeCsvWriter:
    """csv.writer whose free-text cells cannot be formulas: every cell is neutralised with
    `spreadsheet_safe` but a number in one of the `numbers` columns of `header`. Every CSV export
    writes through it."""

    def __init__(self, buffer, header: Sequence[str], *, numbers: Collection[str] = CSV_NUMBER_COLUMNS,
                 **options):
        self._writer = csv.writer(buffer, **options)
        self._numbers = frozenset(i for i, name in enumerate(header) if name in numbers)

    def cell(self, index: int, value):
        if index in self._numbers and (not isinstance(value, str) or _NUMBER.fullmatch(value)):
            return value
        return spreadsheet_safe(value)

    def writerow(self, row: Sequence) -> None:
        self._writer.writerow([self.cell(i, v) for i, v in enumerate(row)])

    def writerows(self, rows: Iterable[Sequence]) -> None:
        for row in rows:
            self.writerow(row)


async def csv_chunks(rows: AsyncIterator[Sequence], *, header: Sequence[str] | None = None,
                     chunk_rows: int | None = None, numbers: Collection[str] = CSV_NUMBER_COLUMNS,
                     ) -> AsyncIterator[bytes]:
    """UTF-8 CSV bytes: the header at once, then one piece per `chunk_rows` rows as they arrive. Free
    text is spreadsheet-safe; the `numbers` columns stay numbers."""
    chunk_rows = chunk_rows or CSV_CHUNK_ROWS
    header = header or HEADER
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, header, numbers=numbers, lineterminator="\r\n")
    writer.writerow(header)
    yield buffer.getvalue().encode()
    buffer.seek(0)
    buffer.truncate()
    pending = 0
    try:
        async for row in rows:
            writer.writerow(row)
            pending += 1
            if pending >= chunk_rows:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
                pending = 0
    except Exception:
        # The status line is sent: end the response (a hanging one holds its connection) and
        # say in the file that it is incomplete.
        log.exception("CSV export failed mid-stream")
        writer.writerow(["# export failed: this file is incomplete, try again"])
        pending = 1
    if pending:
        yield buffer.getvalue().encode()


def write_xlsx(path: Path | str, rows: Iterable[Sequence[str]], *, total: Sequence = (),
               header: Sequence[str] | None = None, progress: Callable[[int], None] | None = None,
               every: int = 20_000, max_rows: int = EXCEL_MAX_ROWS) -> int:
    """Write the rows to an .xlsx file in XlsxWriter's constant-memory mode, starting a new sheet
    whenever one is full, then a Totals sheet with `total` ((label, value) pairs: the figures the
    costs API gives). Money and quantities are numbers with fixed decimals; times are ISO text.
    `progress(rows_done)` is called every `every` rows. Returns the rows written."""
    if max_rows < 2:
        raise ValueError("max_rows must leave room for the header and one row")
    header = list(header or HEADER)
    workbook = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    bold = workbook.add_format({"bold": True})
    money_format, qty_format = workbook.add_format({"num_format": "0.00"}), workbook.add_format(
        {"num_format": "0.000000"})
    formats = [money_format if h in MONEY_COLUMNS or h in ("cost", "idle_share") else qty_format if h in NUMBER_COLUMNS
               or h.endswith("_hours") else None for h in header]
    sheet, sheet_row, sheets, done = None, max_rows, 0, 0
    for row in rows:
        if sheet_row >= max_rows:
            sheets += 1
            sheet = workbook.add_worksheet(pgettext("excel sheet", "Costs") if sheets == 1
                                           else pgettext("excel sheet", "Costs %(number)s") % {"number": sheets})
            sheet.write_row(0, 0, header, bold)
            sheet.set_column(0, len(header) - 1, 14)
            sheet_row = 1
        for col, value in enumerate(row):
            if value is None or value == "":
                continue  # a null is an empty cell, not an empty string
            if formats[col] is not None:
                sheet.write_number(sheet_row, col, float(value), formats[col])
            else:
                sheet.write_string(sheet_row, col, str(value))
        sheet_row += 1
        done += 1
        if progress and done % every == 0:
            progress(done)
    if sheet is None:  # no rows: still a valid workbook with the header
        workbook.add_worksheet(pgettext("excel sheet", "Costs")).write_row(0, 0, header, bold)
    summary = workbook.add_worksheet(pgettext("excel sheet", "Totals"))
    for r, (label, value) in enumerate(total):
        summary.write_string(r, 0, label, bold)
        summary.write_string(r, 1, str(value))
    workbook.close()
    if progress:
        progress(done)
    return done
