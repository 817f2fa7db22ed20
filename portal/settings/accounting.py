"""Usage, the ledger, the billing currency, and reports."""

import os
from pathlib import Path

from portal.settings.env import VAR_DIR

USAGE_RETENTION_DAYS = int(os.environ.get("USAGE_RETENTION_DAYS", "35"))  # raw samples; ledger lines forever
LEDGER_CLOSE_GRACE_S = int(os.environ.get("LEDGER_CLOSE_GRACE_S", "300"))  # an hour's lines wait this long for late usage
# A workspace with no currency of its own is billed in this one (billing.currency); unallocated capacity,
# GPU advice and the scheduler's off-peak flag read this currency's price tables
BILLING_CURRENCY = os.environ.get("BILLING_CURRENCY", "USD").strip().upper()
REPORT_EXPORT_DIR = Path(os.environ.get("REPORT_EXPORT_DIR", VAR_DIR / "exports"))
PLATFORM_NAME = os.environ.get("PLATFORM_NAME", "GPU Platform")  # the provider named on invoices and exports
PLATFORM_REGION = os.environ.get("PLATFORM_REGION", "local")  # FOCUS RegionId of this cluster
# A percentage off every price on Saturdays and Sundays (billing.pricing.rules.WeekendDiscount); empty: no such rule
BILLING_WEEKEND_DISCOUNT = os.environ.get("BILLING_WEEKEND_DISCOUNT", "").strip()
BILLING_INVOICE_NET_DAYS = int(os.environ.get("BILLING_INVOICE_NET_DAYS", "30"))  # an invoice is due this many days after issue
# Consolidating costs into one reporting currency (billing.exchange_rates): each line converted at the rate of
# its own day (`line`) or of its billing month's last day (`period-end`); a day without a rate takes the latest
# of this many days before it (the ECB publishes none at weekends and on holidays)
BILLING_FX_RATE_DAY = os.environ.get("BILLING_FX_RATE_DAY", "line").strip().lower()
BILLING_FX_LOOKBACK_DAYS = int(os.environ.get("BILLING_FX_LOOKBACK_DAYS", "4"))
