"""Price tables: versions with an effective time; a new version never changes past charges."""

import hashlib
import uuid
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from billing import pricing
from billing.pricing import offpeak
from scheduling import clock

AMOUNT_FIELDS = ("cpu_core_hour", "memory_gib_hour", "priority_base", "priority_step", "offpeak_discount",
                 "spot_discount")


def hash_token(raw: str) -> str:
    """The stored digest of a token (API or node): the raw value is never kept."""
    return hashlib.sha256(raw.encode()).hexdigest()


class PriceTable(models.Model):
    name = models.CharField(max_length=100)
    currency = models.CharField(max_length=3, default="USD")
    effective_from = models.DateTimeField(unique=True, db_index=True)
    cpu_core_hour = models.DecimalField(max_digits=12, decimal_places=4)
    memory_gib_hour = models.DecimalField(max_digits=12, decimal_places=4)
    priority_base = models.DecimalField(max_digits=6, decimal_places=4, default=Decimal(1))
    priority_step = models.DecimalField(max_digits=6, decimal_places=4, default=Decimal("0.01"),
                                        help_text="Multiplier = base + priority x step (default 1 + priority/100)")
    offpeak_windows = models.CharField(max_length=200, default="00:00-08:00",
                                       help_text="Comma-separated HH:MM-HH:MM in the platform's time zone")
    offpeak_discount = models.DecimalField(max_digits=5, decimal_places=4, default=Decimal("0.40"))
    spot_discount = models.DecimalField(max_digits=5, decimal_places=4, default=Decimal("0.60"))
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-effective_from"]

    def __str__(self) -> str:
        return f"{self.name} (from {self.effective_from:%Y-%m-%d %H:%M})"

    def clean(self):
        errors: dict[str, list[str]] = {}
        for name in AMOUNT_FIELDS:
            value = getattr(self, name)
            if value is not None and value < 0:
                errors.setdefault(name, []).append("must be 0 or more")
            if name.endswith("discount") and value is not None and value > 1:
                errors.setdefault(name, []).append("is a fraction from 0 to 1 (0.40 = 40 % off)")
        try:
            offpeak.parse_windows(self.offpeak_windows)
        except ValueError as error:
            errors["offpeak_windows"] = [str(error)]
        try:
            pricing.minor_unit(self.currency)
        except ValueError as error:
            errors["currency"] = [str(error)]
        if self.effective_from is not None:
            errors.update(self._period_errors())
        if errors:
            raise ValidationError(errors)

    def _period_errors(self) -> dict[str, list[str]]:
        """A version is in force from its effective_from until the next one's: only future starts, one each."""
        stored = PriceTable.objects.filter(pk=self.pk).values_list("effective_from", flat=True).first()
        now = clock.now()
        if stored != self.effective_from and self.effective_from <= now:
            return {"effective_from": [f"must be in the future (after {now:%Y-%m-%d %H:%M}): "
                                       "prices of the past never change"]}
        if PriceTable.objects.filter(effective_from=self.effective_from).exclude(pk=self.pk).exists():
            return {"effective_from": ["another version takes effect at that moment: their periods would overlap"]}
        return {}

    def validate_unique(self, exclude=None):
        # clean() says it in terms of periods
        super().validate_unique(exclude={*(exclude or ()), "effective_from"})

    def to_pricing(self) -> pricing.PriceTable:
        rates = pricing.Rates(
            currency=self.currency,
            gpu={(r.vendor, r.gpu_model): r.per_gpu_hour for r in self.gpu_rates.all()},
            cpu_core_hour=self.cpu_core_hour, memory_gib_hour=self.memory_gib_hour,
            priority_base=self.priority_base, priority_step=self.priority_step,
            offpeak_windows=offpeak.parse_windows(self.offpeak_windows),
            offpeak_discount=self.offpeak_discount, spot_discount=self.spot_discount,
        )
        return pricing.PriceTable(effective_from=self.effective_from, rates=rates, name=self.name)


class GpuRate(models.Model):
    table = models.ForeignKey(PriceTable, on_delete=models.CASCADE, related_name="gpu_rates")
    vendor = models.CharField(max_length=8, choices=[("nvidia", "NVIDIA"), ("amd", "AMD")])
    gpu_model = models.CharField(max_length=64)
    per_gpu_hour = models.DecimalField(max_digits=12, decimal_places=4)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "vendor", "gpu_model"], name="one_rate_per_model")]
        ordering = ["vendor", "gpu_model"]

    def __str__(self) -> str:
        return f"{self.vendor} {self.gpu_model}: {self.per_gpu_hour}/h"

    def clean(self):
        if self.per_gpu_hour is not None and self.per_gpu_hour < 0:
            raise ValidationError({"per_gpu_hour": "must be 0 or more"})


class NodeToken(models.Model):
    """A node agent's credential: it may report for its own node only. Only the hash is kept."""

    PREFIX = "gpn_"

    node = models.ForeignKey("scheduling.Node", on_delete=models.CASCADE, related_name="agent_tokens")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__name", "-created"]

    def __str__(self) -> str:
        return f"{self.node.name} ({self.hint}…)"

    @staticmethod
    def digest_of(raw: str) -> str:
        return hash_token(raw)


class UsageSample(models.Model):
    """One reading of a node agent: a GPU (or one replica on it) over one interval."""

    id = models.UUIDField(primary_key=True, help_text="Chosen by the agent: resending a sample is harmless")
    node = models.ForeignKey("scheduling.Node", on_delete=models.CASCADE, related_name="usage_samples")
    ts = models.DateTimeField(db_index=True)
    gpu_uuid = models.CharField(max_length=80)
    gpu_index = models.PositiveSmallIntegerField()
    pod_uid = models.CharField(max_length=64, blank=True, db_index=True)
    replica = models.ForeignKey("scheduling.Replica", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="usage_samples")
    gpu_util_pct = models.FloatField(null=True, blank=True)
    mem_used_mib = models.PositiveIntegerField(default=0)
    interval_s = models.FloatField()
    received = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["replica", "ts"])]


class UsageHour(models.Model):
    """Hourly rollup per job: allocated vs used GPU-hours and the cost of that hour. Kept forever."""

    hour = models.DateTimeField(db_index=True)
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="usage_hours")
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="usage_hours")
    queue = models.CharField(max_length=50)
    gpu_model = models.CharField(max_length=64)
    sharing = models.CharField(max_length=16)
    allocated_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    used_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    cpu_core_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    memory_gib_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    currency = models.CharField(max_length=3, default="USD")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "job", "gpu_model", "sharing"],
                                               name="one_rollup_per_job_hour")]
        ordering = ["hour", "job_id"]


# --------------------------------------------------------------------------- reports


class UsageDay(models.Model):
    """Daily rollup per job, node, GPU model and sharing mode: what finance reports read.

    Recomputed whole for a day from the placements (and UsageHour for used GPU-hours), so
    re-running a past day never counts anything twice.
    """

    day = models.DateField(db_index=True, help_text="In the platform's time zone")
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="usage_days")
    queue = models.CharField(max_length=50)
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="usage_days")
    job_name = models.CharField(max_length=200)
    node = models.CharField(max_length=253)
    gpu_model = models.CharField(max_length=64)
    sharing = models.CharField(max_length=16, help_text="exclusive, fraction, mig or timeslice")
    allocated_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    used_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    idle_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    exclusive_gpu_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0,
                                              help_text="Whole GPUs the same placements would have needed")
    cpu_core_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    memory_gib_hours = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    estimated_cost = models.DecimalField(max_digits=16, decimal_places=6, default=0,
                                         help_text="The job's frozen estimate, on the day it started")
    cost = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    on_demand_cost = models.DecimalField(max_digits=16, decimal_places=6, default=0,
                                         help_text="The same placements on exclusive on-demand GPUs")
    currency = models.CharField(max_length=3, default="USD")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "job", "node", "gpu_model", "sharing"],
                                               name="one_usage_day_per_job_node")]
        indexes = [models.Index(fields=["workspace", "day"])]
        ordering = ["day", "workspace_id", "job_id", "node"]


class Budget(models.Model):
    """A monthly spending limit for a workspace; alerts at 80 % and 100 %."""

    workspace = models.OneToOneField("portal.Workspace", on_delete=models.CASCADE, related_name="budget")
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")
    block_at_limit = models.BooleanField(default=False, help_text="Refuse new submissions once 100 % is spent")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.workspace}: {self.amount} {self.currency}/month"


class BudgetAlert(models.Model):
    """A threshold crossed in one period: the unique constraint makes each fire once."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    period_start = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=14, decimal_places=4)
    fired_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["budget", "period_start", "threshold"],
                                               name="one_alert_per_threshold_and_period")]
        ordering = ["-fired_at"]


class ReportExport(models.Model):
    """An Excel export built in the background for one user; only that user may fetch it."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="report_exports")
    filters = models.JSONField(default=dict)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    rows_done = models.PositiveBigIntegerField(default=0)
    rows_total = models.PositiveBigIntegerField(default=0)
    file_name = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
