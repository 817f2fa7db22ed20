"""The billing layer's public face: what portal may import from billing.

Besides this module portal may import only ``billing.models`` and ``billing.forms``; an import-linter
contract in pyproject.toml keeps it so. A name portal needs goes into the group of its concept below.
Offered whole as well, for callers that write ``pricing.quantize_money(...)``: ``currency``, ``pricing``,
``ledger_selectors``, ``ledger_services``, ``capacity``, ``exports``, ``report_selectors``,
``report_services`` and ``metrics``.
"""
# The groups below are by concept, not alphabetical:
# isort: skip_file

# ------------------------------------------------------------ Quotes and submitting
from billing.quotes import DEFAULT_DURATION_S, PoolOffer, Quote, QuoteError, quote
from billing.time_zone import platform_tz
from billing.services import (
    BatchSpec,
    fire_schedules,
    has_schedule,
    quote_for_workspace,
    service_rates,
    states_duration,
    submit_quoted_job,
    submit_quoted_jobs,
    submit_quoted_schedule,
)

# ------------------------------------------------------------ Prices and currencies
from billing import currency, pricing
from billing.currency import (
    CurrencyChangeRefused,
    currency_at,
    default_currency,
    set_workspace_currency,
    workspace_currencies,
)
from billing.pricing import MINOR_UNITS, quantize_money, table_in_force
from billing.selectors import pool_offers, pool_problems, price_currencies, price_tables

# ------------------------------------------------------------ Ledger
from billing.ledger import selectors as ledger_selectors, services as ledger_services
from billing.ledger.jobs import estimate_check, job_cost, job_efficiency
from billing.ledger.kept import ledger_read, one_revision
from billing.ledger.periods import MONTH_PATTERN, MonthError, month_end, parse_month, period_start
from billing.ledger.posting import post_ledger
from billing.ledger.prices import billed_priority, money_text
from billing.ledger.selectors import array_total, job_total, job_totals, ledger_cursor
from billing.token_costs import TokenCosts, per_million_tokens

# ------------------------------------------------------------ Invoices
from billing.invoices import render as invoice_render, selectors as invoice_selectors, services as invoices

# ------------------------------------------------------------ Metering and node tokens
from billing.metering.costs import replica_allocation
from billing.metering.ingest import MAX_BATCH, ingest
from billing.metering.series import job_usage_series
from billing.metering.tokens import NODE_NAME, JoinRefused, create_join_token, create_node_token, join_node

# ------------------------------------------------------------ Reports, budgets and idle GPUs
from billing.reports import capacity, exports, selectors as report_selectors, services as report_services
from billing.reports import consolidation as report_consolidation
from billing import exchange_rates
from billing.reports.capacity import forecast, idle_by_job, idle_cost
from billing.reports.dashboard import tenant_dashboard
from billing.reports.selectors import parse_filters, savings_by_period
from billing.reports.tasks import export_dir, report_totals
from billing.idle.selectors import idle_placements, job_idle
from billing import chargeback
from billing.chargeback import ChargebackError
from billing.idle.keep_alive import keep_alive_of, kept_alive, parse_until, set_keep_alive
from billing.idle.signals import ssh_bytes_by_job, use_ssh_provider

# ------------------------------------------------------------ Notices, signals and metrics
from billing import metrics
from billing.notices import Notice, mail_subject, notice_raised, written_in_english

# ------------------------------------------------------------ Quote texts
from billing import quote_texts
from billing.quote_texts import between, pool_problem_text, refusals_text, tradeoff_text

# ------------------------------------------------------------ Billing accounts and prepaid credit
from billing import accounts, credits
from billing.accounts import AccountError
