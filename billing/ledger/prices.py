"""Prices the ledger defines once for everyone: what the same held time costs on whole GPUs."""

from __future__ import annotations

from decimal import Decimal

from billing import pricing
from billing.quotes import DEADLINE


def exclusive_share(gpus: int) -> Decimal:
    """Whole GPUs charged for `gpus` devices held exclusively."""
    return pricing.charged_gpu_share("exclusive", num_gpus=gpus) if gpus else Decimal(0)


def exclusive_allocation(allocation: pricing.Allocation, gpus: int) -> pricing.Allocation:
    """The same placement on whole GPUs: the comparison behind savings and statements."""
    return pricing.Allocation(share=exclusive_share(gpus), vendor=allocation.vendor if gpus else None,
                              gpu_model=allocation.gpu_model if gpus else None, cpu_cores=allocation.cpu_cores,
                              memory_gib=allocation.memory_gib)


def exclusive_hourly_price(rates: pricing.Rates, allocation: pricing.Allocation, gpus: int, *,
                           priority: int) -> Decimal:
    """Whole GPUs at the peak, on-demand rate: no off-peak or spot discount, no sharing."""
    return pricing.hourly_price(rates, exclusive_allocation(allocation, gpus), priority=priority)


def list_hourly_price(rates: pricing.Rates, allocation: pricing.Allocation, *, priority: int) -> Decimal:
    """The slice held, at the peak, on-demand rate."""
    return pricing.hourly_price(rates, allocation, priority=priority)


def billed_priority(job) -> int:
    """The priority a job is priced at: the one it was submitted and quoted with. An operator who
    changes it later changes its place in the queue, not what the tenant agreed to pay."""
    submitted = job.spec.get("priority") if isinstance(job.spec, dict) else None
    return submitted if isinstance(submitted, int) and not isinstance(submitted, bool) else job.priority


def by_deadline(job) -> bool:
    """Whether a job is priced "by the deadline" (rules.ByDeadline): it chose that option of its quote."""
    quote = job.quote if isinstance(job.quote, dict) else {}
    return job.complete_by is not None and quote.get("when") == DEADLINE


def money_text(amount: Decimal, currency: str) -> str:
    """Money as exchanged: a string with exactly the currency's decimals."""
    return str(pricing.quantize_money(amount, currency))
