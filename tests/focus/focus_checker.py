"""A FinOps FOCUS conformance checker for the platform's exports: column names, data types, allowed
values, nullability, and the relations between columns, as the FOCUS 1.2 columns' texts state them (the
mandatory columns of 1.0, which 1.2 keeps). `check_rows` takes rows as dicts (column -> text, or
the values an .xlsx cell holds) and returns every violation found, as "row N, Column: what" sentences.

A null is an empty cell (CSV) or an empty or missing cell (XLSX). Custom columns start with x_; the platform's
are specified here too, so a new x_ column is a conscious addition to COLUMNS (and to docs/finance/).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from billing.pricing import MINOR_UNITS

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SERVICE_CATEGORIES = frozenset({
    "AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases", "Developer Tools",
    "Multicloud", "Identity", "Integration", "Internet of Things", "Management and Governance", "Media",
    "Migration", "Mobile", "Networking", "Security", "Storage", "Web", "Other"})


@dataclass(frozen=True)
class Column:
    kind: str  # money, decimal, integer, text, datetime, currency, json, bool
    nullable: bool = True
    allowed: frozenset[str] | None = None


def _c(kind: str, nullable: bool = True, allowed: Iterable[str] | None = None) -> Column:
    return Column(kind, nullable, frozenset(allowed) if allowed is not None else None)


# FOCUS 1.0's columns the platform gives, as the specification types them
FOCUS = {
    "BilledCost": _c("money", False), "BillingAccountId": _c("text", False), "BillingAccountName": _c("text"),
    "BillingCurrency": _c("currency", False), "BillingPeriodEnd": _c("datetime", False),
    "BillingPeriodStart": _c("datetime", False),
    "ChargeCategory": _c("text", False, {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}),
    "ChargeClass": _c("text", True, {"Correction"}), "ChargeDescription": _c("text"),
    "ChargeFrequency": _c("text", True, {"One-Time", "Recurring", "Usage-Based"}),
    "ChargePeriodEnd": _c("datetime", False), "ChargePeriodStart": _c("datetime", False),
    "ConsumedQuantity": _c("decimal"), "ConsumedUnit": _c("text"), "ContractedCost": _c("money", False),
    "ContractedUnitPrice": _c("decimal"), "EffectiveCost": _c("money", False), "InvoiceIssuerName": _c("text", False),
    "ListCost": _c("money", False), "ListUnitPrice": _c("decimal"),
    "PricingCategory": _c("text", True, {"Standard", "Dynamic", "Committed", "Other"}),
    "PricingQuantity": _c("decimal"), "PricingUnit": _c("text"), "ProviderName": _c("text", False),
    "PublisherName": _c("text", False), "RegionId": _c("text"), "RegionName": _c("text"), "ResourceId": _c("text"),
    "ResourceName": _c("text"), "ResourceType": _c("text"), "ServiceCategory": _c("text", False, SERVICE_CATEGORIES),
    "ServiceName": _c("text", False), "SkuId": _c("text"), "SkuPriceId": _c("text"), "SubAccountId": _c("text"),
    "SubAccountName": _c("text"), "Tags": _c("json"),
}
# the platform's own columns (docs/finance/exports.md)
CUSTOM = {
    "x_JobId": _c("integer"), "x_JobName": _c("text"), "x_Submitter": _c("text"), "x_Pool": _c("text"),
    "x_Node": _c("text"), "x_GpuModel": _c("text"),
    "x_SharingMode": _c("text", True, {"exclusive", "fraction", "mig", "timeslice"}), "x_Slice": _c("text"),
    "x_AllocatedGpuHours": _c("decimal", False), "x_UsedGpuHours": _c("decimal", False),
    "x_IdleGpuHours": _c("decimal", False), "x_ExclusiveGpuHours": _c("decimal", False),
    "x_CpuCoreHours": _c("decimal", False), "x_MemoryGibHours": _c("decimal", False),
    "x_StorageGibHours": _c("decimal", False), "x_ExclusiveCost": _c("money", False),
    "x_Discounts": _c("text"), "x_DiscountAmount": _c("money", False), "x_SharingSaving": _c("money", False),
    "x_Provisional": _c("bool", False), "x_Reason": _c("text"), "x_Author": _c("text"),
    "x_LostGpuHours": _c("decimal"), "x_PromptTokens": _c("integer"), "x_CompletionTokens": _c("integer"),
    "x_OriginalCost": _c("decimal"), "x_OriginalCurrency": _c("currency"), "x_ExchangeRate": _c("decimal"),
    "x_ChargeKind": _c("text", True, {"usage", "idle-share"}),
}
COLUMNS = {**FOCUS, **CUSTOM}
ORIGINAL = ("x_OriginalCost", "x_OriginalCurrency", "x_ExchangeRate")

# FOCUS 1.2, PricingQuantity, ListUnitPrice, ContractedUnitPrice: "MUST NOT be null when ChargeCategory is
# "Usage" or "Purchase" and ChargeClass is not "Correction"".
PRICED_CATEGORIES = frozenset({"Usage", "Purchase"})
NOT_NULL_WHEN_PRICED = ("PricingQuantity", "PricingUnit", "ListUnitPrice", "ContractedUnitPrice")
# ListCost, ContractedCost: "When <unit price> is present and not null, multiplying the <unit price> by
# PricingQuantity MUST produce the <cost>, except in cases of ChargeClass "Correction""; and with the unit price
# null, "the <cost> of a charge unrelated to other charges (e.g., when the ChargeCategory is "Credit") MUST
# match the BilledCost". A cost is rounded to its currency's minor unit, so the product is compared rounded so.
UNIT_PRICED = (("ListUnitPrice", "ListCost"), ("ContractedUnitPrice", "ContractedCost"))
UNRELATED_CATEGORIES = frozenset({"Credit"})
# ListUnitPrice, ContractedUnitPrice: "a Decimal within the range of non-negative decimal values".
NON_NEGATIVE = ("ListUnitPrice", "ContractedUnitPrice")
# ResourceType: "MUST NOT be null when a corresponding ResourceId is not null"; "When a corresponding ResourceId
# value is null, the ResourceType column value MUST also be null."
NULL_TOGETHER = (("ResourceId", "ResourceType"), ("ConsumedQuantity", "ConsumedUnit"),
                 ("PricingQuantity", "PricingUnit"))


def _null(value) -> bool:
    return value is None or value == ""


def _decimal(value) -> Decimal | None:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _type_error(name: str, column: Column, value, currency: str | None, text: bool) -> str | None:
    kind = column.kind
    if kind in ("money", "decimal"):
        if text and not re.fullmatch(r"-?\d+(\.\d+)?", str(value)):
            return f"{value!r} is not a decimal number"
        number = _decimal(value)
        if number is None:
            return f"{value!r} is not a number"
        if kind == "money" and text and currency in MINOR_UNITS:
            places = MINOR_UNITS[currency]
            if -number.as_tuple().exponent != places:
                return f"{value!r} does not have {currency}'s {places} decimals"
    elif kind == "integer":
        if not re.fullmatch(r"-?\d+", str(value).removesuffix(".0") if not text else str(value)):
            return f"{value!r} is not a whole number"
    elif kind == "datetime":
        if not ISO_UTC.fullmatch(str(value)):
            return f"{value!r} is not an ISO 8601 UTC time (2026-03-01T00:00:00Z)"
    elif kind == "currency":
        if value not in MINOR_UNITS:
            return f"{value!r} is not an ISO 4217 code the platform bills in"
    elif kind == "json":
        try:
            if not isinstance(json.loads(value), dict):
                return f"{value!r} is not a JSON object"
        except (TypeError, ValueError):
            return f"{value!r} is not JSON"
    elif kind == "bool":
        if value not in ("true", "false"):
            return f"{value!r} is not true or false"
    elif kind == "text" and not isinstance(value, str):
        return f"{value!r} is not text"
    return None


def check_header(header: Iterable[str]) -> list[str]:
    header = list(header)
    problems = [f"{name}: not a FOCUS column, and custom columns start with x_" for name in header
                if name not in FOCUS and not name.startswith("x_")]
    problems += [f"{name}: an x_ column not specified (add it to the checker and docs/finance)" for name in header
                 if name.startswith("x_") and name not in CUSTOM]
    problems += [f"{name}: a mandatory FOCUS column is missing" for name in FOCUS if name not in header]
    if len(set(header)) != len(header):
        problems.append("a column appears twice")
    return problems


def check_rows(rows: Iterable[Mapping], *, text: bool = True) -> list[str]:
    """Every violation in `rows` (dicts by column). `text`: the cells are CSV text (exact decimals checked);
    else .xlsx values (numbers as numbers)."""
    problems: list[str] = []
    for number, row in enumerate(rows, start=2):
        where = f"row {number}"
        currency = row.get("BillingCurrency")
        for name, column in COLUMNS.items():
            if name not in row:
                continue
            value = row[name]
            if _null(value):
                if not column.nullable:
                    problems.append(f"{where}, {name}: must not be null")
                continue
            if column.allowed is not None and value not in column.allowed:
                problems.append(f"{where}, {name}: {value!r} is not one of {sorted(column.allowed)}")
                continue
            if (error := _type_error(name, column, value, currency, text)) is not None:
                problems.append(f"{where}, {name}: {error}")
        problems += [f"{where}: {p}" for p in _relations(row)]
    return problems


def _relations(row: Mapping) -> list[str]:
    problems = []
    billed, effective = _decimal(row.get("BilledCost")), _decimal(row.get("EffectiveCost"))
    # no commitment discounts on this platform: what is billed is what is effective
    if not row.get("CommitmentDiscountId") and billed != effective:
        problems.append(f"BilledCost {billed} != EffectiveCost {effective} without a commitment")
    usage = row.get("ChargeCategory") == "Usage"
    if not usage and not _null(row.get("ConsumedQuantity")):
        problems.append("ConsumedQuantity is for Usage charges only")
    for first, second in NULL_TOGETHER:
        if first in row and second in row and _null(row.get(first)) != _null(row.get(second)):
            problems.append(f"{first} and {second} are null together")
    correction = row.get("ChargeClass") == "Correction"
    if correction and usage:
        problems.append("a Correction is an adjustment, not Usage")
    problems += _pricing(row, correction)
    for start, end in (("ChargePeriodStart", "ChargePeriodEnd"), ("BillingPeriodStart", "BillingPeriodEnd")):
        if ISO_UTC.fullmatch(str(row.get(start))) and ISO_UTC.fullmatch(str(row.get(end))):
            if datetime.fromisoformat(str(row[start])) > datetime.fromisoformat(str(row[end])):
                problems.append(f"{start} is after {end}")
    if all(name in row for name in ORIGINAL):
        given = [not _null(row[name]) for name in ORIGINAL]
        if any(given) and not all(given):
            problems.append("x_OriginalCost, x_OriginalCurrency and x_ExchangeRate are given together")
        elif all(given):
            rate, original = _decimal(row["x_ExchangeRate"]), _decimal(row["x_OriginalCost"])
            currency = row.get("BillingCurrency")
            if rate is None or rate <= 0:
                problems.append(f"x_ExchangeRate {row['x_ExchangeRate']!r} is not a positive rate")
            elif original is not None and currency in MINOR_UNITS and billed is not None:
                step = Decimal(1).scaleb(-MINOR_UNITS[currency])
                if (original * rate).quantize(step, rounding=ROUND_HALF_UP) != billed.quantize(step):
                    problems.append(f"BilledCost {billed} is not x_OriginalCost {original} x x_ExchangeRate {rate}, "
                                    "rounded once")
    return problems


def _pricing(row: Mapping, correction: bool) -> list[str]:
    """The unit prices, the pricing quantity and the costs they make (UNIT_PRICED)."""
    problems = []
    category, currency = row.get("ChargeCategory"), row.get("BillingCurrency")
    if category in PRICED_CATEGORIES and not correction:
        problems += [f"{name} must not be null for a {category} charge" for name in NOT_NULL_WHEN_PRICED
                     if name in row and _null(row[name])]
    for name in NON_NEGATIVE:
        price = _decimal(row.get(name)) if not _null(row.get(name)) else None
        if price is not None and price < 0:
            problems.append(f"{name} {price} is negative")
    quantity = _decimal(row.get("PricingQuantity")) if not _null(row.get("PricingQuantity")) else None
    billed = _decimal(row.get("BilledCost"))
    for price_name, cost_name in UNIT_PRICED:
        if price_name not in row or cost_name not in row:
            continue
        cost = _decimal(row[cost_name])
        if _null(row[price_name]):
            if category in UNRELATED_CATEGORIES and cost != billed:
                problems.append(f"{cost_name} {cost} != BilledCost {billed} of a {category} without a unit price")
            continue
        price = _decimal(row[price_name])
        if correction or None in (price, quantity, cost) or currency not in MINOR_UNITS:
            continue
        step = Decimal(1).scaleb(-MINOR_UNITS[currency])
        if (price * quantity).quantize(step, rounding=ROUND_HALF_UP) != cost.quantize(step):
            problems.append(f"{cost_name} {cost} is not {price_name} {price} x PricingQuantity {quantity}")
    return problems


# --------------------------------------------------------------------------- the costs API's rows

API_MONEY = ("list_cost", "exclusive_cost", "cost")


def check_api(body: Mapping) -> list[str]:
    """The costs API's answer: currencies ISO 4217, money with the currency's decimals, the totals the sum of
    the rows (one currency), and the x_Original* columns of a consolidated answer given together."""
    problems = []
    for total in body["totals"]:
        if total["currency"] not in MINOR_UNITS:
            problems.append(f"totals: {total['currency']!r} is not a currency")
    for number, row in enumerate(body["rows"], start=1):
        currency = row.get("currency")
        if currency not in MINOR_UNITS:
            problems.append(f"row {number}, currency: {currency!r} is not a currency")
            continue
        for name in API_MONEY + (("idle_share",) if "idle_share" in row else ()):
            if (error := _type_error(name, Column("money"), row[name], currency, True)) is not None:
                problems.append(f"row {number}, {name}: {error}")
        if any(name in row for name in ORIGINAL):
            if row.get("x_OriginalCurrency") not in MINOR_UNITS:
                problems.append(f"row {number}, x_OriginalCurrency: {row.get('x_OriginalCurrency')!r}")
            elif (error := _type_error("x_OriginalCost", Column("money"), row.get("x_OriginalCost"),
                                       row["x_OriginalCurrency"], True)) is not None:
                problems.append(f"row {number}, x_OriginalCost: {error}")
            rate = row.get("x_ExchangeRate")
            if rate is not None and (_decimal(rate) is None or _decimal(rate) <= 0):
                problems.append(f"row {number}, x_ExchangeRate: {rate!r} is not a positive rate")
    if body.get("currency") and body.get("pages", 1) == 1:
        summed = sum((Decimal(r["cost"]) for r in body["rows"]), Decimal(0))
        if summed != Decimal(body["total"]):
            problems.append(f"total {body['total']} is not the sum of the rows {summed}")
    return problems
