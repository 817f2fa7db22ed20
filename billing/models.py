"""Price tables: versions with an effective time; a new version never changes past charges."""

import contextvars
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing import pricing
from billing.pricing.rules import price_rules
from scheduling.api import Conflict, clock, offpeak

AMOUNT_FIELDS = pricing.RATE_AMOUNTS
# A price version's fields, in the order the form, the console and its audit show them: the one list
# they all derive from (a new price field is a model field, its place here, its label and help text).
PRICE_FIELDS = ("name", "currency", "effective_from", *AMOUNT_FIELDS[:4], "offpeak_windows", "offpeak_time_zone",
                *AMOUNT_FIELDS[4:])


def weekend_discount() -> Decimal | None:
    """settings.BILLING_WEEKEND_DISCOUNT: the percentage off at weekends; unset or empty: no weekend rule."""
    configured = str(getattr(settings, "BILLING_WEEKEND_DISCOUNT", "") or "").strip()
    return Decimal(configured) if configured else None


def hash_token(raw: str) -> str:
    """The stored digest of a token (API or node): the raw value is never kept."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ClockUpdated(models.DateTimeField):
    """When the row was last saved, by the platform clock (`auto_now` reads the machine's)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("default", clock.now)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance, add):
        value = clock.now()
        setattr(model_instance, self.attname, value)
        return value


class PriceTable(models.Model):
    """A version of one currency's price list: each currency is a timeline of its own, and a workspace
    is priced on the timeline of the currency it is billed in (WorkspaceCurrency)."""

    name = models.CharField(max_length=100)
    currency = models.CharField(max_length=3, default="USD")
    effective_from = models.DateTimeField(db_index=True)
    cpu_core_hour = models.DecimalField(max_digits=12, decimal_places=4)
    memory_gib_hour = models.DecimalField(max_digits=12, decimal_places=4)
    priority_base = models.DecimalField(max_digits=6, decimal_places=4, default=Decimal(1))
    priority_step = models.DecimalField(max_digits=6, decimal_places=4, default=Decimal("0.01"),
                                        help_text="Multiplier = base + priority x step (default 1 + priority/100)")
    offpeak_windows = models.CharField(max_length=200, default="00:00-08:00",
                                       help_text="Comma-separated HH:MM-HH:MM in the table's off-peak time zone")
    offpeak_time_zone = models.CharField(
        max_length=64, blank=True,
        help_text="The IANA zone the off-peak windows are read in, e.g. Asia/Shanghai; blank: the platform's.")
    offpeak_discount = models.DecimalField(max_digits=5, decimal_places=4, default=Decimal("0.40"))
    spot_discount = models.DecimalField(max_digits=5, decimal_places=4, default=Decimal("0.60"))
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["-effective_from"]
        constraints = [models.UniqueConstraint(fields=["currency", "effective_from"],
                                               name="one_version_per_currency_and_time")]

    def __str__(self) -> str:
        return f"{self.name} ({self.currency}, from {self.effective_from:%Y-%m-%d %H:%M})"

    def clean(self):
        errors: dict[str, list[str]] = {}
        for name in AMOUNT_FIELDS:
            value = getattr(self, name)
            if value is not None and value < 0:
                errors.setdefault(name, []).append(gettext("must be 0 or more"))
            if name.endswith("discount") and value is not None and value > 1:
                # xgettext:no-python-format
                errors.setdefault(name, []).append(gettext("is a fraction from 0 to 1 (0.40 = 40 % off)"))
        try:
            offpeak.parse_windows(self.offpeak_windows)
        except ValueError as error:
            errors["offpeak_windows"] = [str(error)]
        if self.offpeak_time_zone:
            try:
                offpeak.as_zone(self.offpeak_time_zone)
            except ValueError as error:
                errors["offpeak_time_zone"] = [str(error)]
        self.currency = (self.currency or "").strip().upper()
        try:
            pricing.minor_unit(self.currency)
        except ValueError as error:
            errors["currency"] = [str(error)]
        if self.effective_from is not None and "currency" not in errors:
            errors.update(self._period_errors())
        if errors:
            raise ValidationError(errors)

    def _period_errors(self) -> dict[str, list[str]]:
        """A version is in force on its currency's timeline from its effective_from until the next one's:
        only future starts, one each per currency."""
        stored = PriceTable.objects.filter(pk=self.pk).values_list("effective_from", "currency").first()
        now = clock.now()
        if stored != (self.effective_from, self.currency) and self.effective_from <= now:
            shown = timezone.localtime(now)  # in the zone the form was read in: the operator's
            return {"effective_from": [gettext("must be in the future (after %(now)s): prices of the past never change")
                                       % {"now": f"{shown:%Y-%m-%d %H:%M %Z}"}]}
        same_time = PriceTable.objects.filter(currency=self.currency, effective_from=self.effective_from)
        if same_time.exclude(pk=self.pk).exists():
            return {"effective_from": [gettext("another %(currency)s version takes effect at that moment: their "
                                               "periods would overlap") % {"currency": self.currency}]}
        return {}

    def validate_unique(self, exclude=None):
        # clean() says it in terms of periods
        super().validate_unique(exclude={*(exclude or ()), "effective_from", "currency"})

    def validate_constraints(self, exclude=None):
        super().validate_constraints(exclude={*(exclude or ()), "effective_from", "currency"})

    def to_pricing(self) -> pricing.PriceTable:
        rates = pricing.Rates(
            currency=self.currency,
            gpu={(r.vendor, r.gpu_model): r.per_gpu_hour for r in self.gpu_rates.all()},
            storage={r.storage_class: r.per_gib_month for r in self.storage_rates.all()},
            offpeak_windows=offpeak.parse_windows(self.offpeak_windows), offpeak_time_zone=self.offpeak_time_zone,
            **{name: getattr(self, name) for name in AMOUNT_FIELDS},
            rules=price_rules(weekend_discount=weekend_discount()),
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
            raise ValidationError({"per_gpu_hour": gettext("must be 0 or more")})


class StorageRate(models.Model):
    """A price version's price of one storage class, per GiB-month of the bytes used (sampled hourly)."""

    table = models.ForeignKey(PriceTable, on_delete=models.CASCADE, related_name="storage_rates")
    storage_class = models.CharField(max_length=63, default="standard",
                                     help_text=_("The volumes' storage class, e.g. standard"))
    per_gib_month = models.DecimalField(max_digits=12, decimal_places=4,
                                        help_text=_("Price of one GiB used for a month (730 hours)"))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "storage_class"], name="one_rate_per_storage_class")]
        ordering = ["storage_class"]

    def __str__(self) -> str:
        return f"{self.storage_class}: {self.per_gib_month}/GiB-month"

    def clean(self):
        if self.per_gib_month is not None and self.per_gib_month < 0:
            raise ValidationError({"per_gib_month": gettext("must be 0 or more")})


class StorageSample(models.Model):
    """The bytes one volume or dataset version used in one hour of platform time: read from its folder
    on the simulated cluster, from the kubelet's volume stats (reported by the node agent) on Kubernetes.
    One per thing and hour; the ledger bills the hour's GiB-hours from it."""

    class Kind(models.TextChoices):
        VOLUME = "volume", _("Volume")
        DATASET = "dataset", _("Dataset version")

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="storage_samples")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=140, help_text="The volume's name, or dataset@vN")
    storage_class = models.CharField(max_length=63)
    hour = models.DateTimeField(help_text="The hour (UTC) the sample stands for")
    ts = models.DateTimeField()
    used_bytes = models.PositiveBigIntegerField()
    source = models.CharField(max_length=16, help_text="simulated (the folder) or kubelet (volume stats)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "kind", "name", "hour"],
                                               name="one_storage_sample_per_hour")]
        indexes = [models.Index(fields=["hour"])]
        ordering = ["hour", "workspace_id", "kind", "name"]

    def __str__(self) -> str:
        return f"{self.workspace_id} {self.kind} {self.name} {self.hour:%Y-%m-%d %H:00}: {self.used_bytes} B"


class NodeToken(models.Model):
    """A node agent's credential: it may report for its own node only. Only the hash is kept."""

    PREFIX = "gpn_"

    node = models.ForeignKey("scheduling.Node", on_delete=models.CASCADE, related_name="agent_tokens")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created = models.DateTimeField(default=clock.now, editable=False)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__name", "-created", "-id"]

    def __str__(self) -> str:
        return f"{self.node.name} ({self.hint}…)"

    @staticmethod
    def digest_of(raw: str) -> str:
        return hash_token(raw)


class JoinToken(models.Model):
    """A short-lived credential that lets agents claim nodes of one pool: an agent posts it with its
    node's name and receives that node's own token (kubeadm-join style). Only the hash is kept."""

    PREFIX = "gpj_"

    pool = models.ForeignKey("scheduling.NodePool", on_delete=models.CASCADE, related_name="join_tokens")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created = models.DateTimeField(default=clock.now, editable=False)
    expires = models.DateTimeField()
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"join {self.pool.name} ({self.hint}…)"

    @staticmethod
    def digest_of(raw: str) -> str:
        return hash_token(raw)


class BilledRecordIsFinal(Conflict):
    title = "Billed records cannot be changed"


class WrittenOnce:
    """A billed record is written once and never edited or deleted one by one (admin, forms, shell): a
    correction is an adjustment line of its own. The ledger's own bulk work (posting replaces open
    hours' usage lines, retention drops old samples) goes through querysets, which this leaves alone."""

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise BilledRecordIsFinal(f"{self._meta.verbose_name} {self.pk} is billed and cannot be changed; "
                                      "record an adjustment instead")
        return super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise BilledRecordIsFinal(f"{self._meta.verbose_name} {self.pk} is billed and cannot be deleted; "
                                  "record an adjustment instead")


class UsageSample(WrittenOnce, models.Model):
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
    received = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        indexes = [models.Index(fields=["replica", "ts"])]


class LedgerRevision(models.Model):
    """One row: a token that changes in the same transaction as every write to the charge lines, so sums
    read from the ledger can be kept (billing.ledger.revision) until it changes. A write that rolls back
    takes its token back with it, and a new token is random, so no two states of the ledger share one."""

    token = models.CharField(max_length=32)

    @classmethod
    def bump(cls) -> None:
        block = _revision_block.get()
        if block is not None:  # a write in a block: every read after it asks the database (it may roll back)
            block.clear()
            block["written"] = True
        token = uuid.uuid4().hex
        if not cls.objects.filter(pk=1).update(token=token):
            cls.objects.update_or_create(pk=1, defaults={"token": token})

    @classmethod
    def current(cls) -> str:
        block = _revision_block.get()
        if block is not None and "written" not in block:
            if "token" not in block:
                block["token"] = cls._read()
            return block["token"]
        return cls._read()

    @classmethod
    def _read(cls) -> str:
        return cls.objects.filter(pk=1).values_list("token", flat=True).first() or ""

    @classmethod
    @contextmanager
    def one_read(cls) -> Iterator[None]:
        """Inside, the token is read once (until a write): a page's many kept figures share that read."""
        reset = _revision_block.set({})
        try:
            yield
        finally:
            _revision_block.reset(reset)


_revision_block: contextvars.ContextVar[dict | None] = contextvars.ContextVar("ledger_revision_block", default=None)


class ChargeLine(WrittenOnce, models.Model):
    """One line of the ledger: a job's held slice on one price, for (part of) one hour.

    Quantities are exact; each money column is rounded once, to the currency's minor unit, when the
    line is written, and every total anywhere is a sum of these columns. The lines of an hour stay
    provisional (recomputed as usage arrives) until the hour closes; then they never change.
    Adjustments are lines too (no job, a reason and an author), so totals need no second source.
    """

    class Category(models.TextChoices):
        USAGE = "Usage", _("Usage")
        ADJUSTMENT = "Adjustment", _("Adjustment")
        CREDIT = "Credit", _("Credit")

    class Resource(models.TextChoices):
        COMPUTE = "compute", _("Compute")
        STORAGE = "storage", _("Storage")

    category = models.CharField(max_length=12, choices=Category.choices, default=Category.USAGE)
    resource = models.CharField(max_length=8, choices=Resource.choices, blank=True,
                                help_text="What a usage line bills: held GPUs, cores and memory, or stored GiB "
                                          "(blank on adjustments and credits)")
    hour = models.DateTimeField(db_index=True, help_text="The hour (UTC) the line belongs to")
    day = models.DateField(help_text="The hour's date in the platform's time zone")
    period = models.DateField(help_text="First day of the billing month (platform time zone)")
    charge_start = models.DateTimeField()
    charge_end = models.DateTimeField()
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.PROTECT, related_name="charge_lines")
    queue = models.CharField(max_length=50, blank=True)
    job = models.ForeignKey("scheduling.Job", null=True, blank=True, on_delete=models.PROTECT,
                            related_name="charge_lines")
    job_name = models.CharField(max_length=200, blank=True)
    submitter = models.CharField(max_length=150, blank=True)
    pool = models.CharField(max_length=50, blank=True)
    node = models.CharField(max_length=253, blank=True)
    vendor = models.CharField(max_length=8, blank=True)
    gpu_model = models.CharField(max_length=64, blank=True)
    sharing = models.CharField(max_length=16, blank=True, help_text="exclusive, fraction, mig or timeslice")
    slice = models.CharField(max_length=64, blank=True, help_text="What was held, e.g. 0.33 GPU or 1g.10gb")
    sku_id = models.CharField(max_length=100, blank=True,
                              help_text="GPU model, or model/MIG profile; storage/<class> for storage")
    resource_name = models.CharField(max_length=200, blank=True,
                                     help_text="What storage was billed: volume/<name> or dataset/<name>@v<N>")
    price_table = models.ForeignKey(PriceTable, null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="charge_lines")
    offpeak = models.BooleanField(default=False)
    spot = models.BooleanField(default=False)
    list_unit_price = models.DecimalField(max_digits=14, decimal_places=4, default=0,
                                          help_text="Peak, on-demand price of one whole GPU-hour "
                                                    "(storage: of one GiB-month)")
    allocated_gpu_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    used_gpu_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    exclusive_gpu_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0,
                                              help_text="Whole GPUs the same placements held")
    idle_gpu_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    cpu_core_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    memory_gib_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0)
    storage_gib_hours = models.DecimalField(max_digits=18, decimal_places=9, default=0,
                                            help_text="GiB used (sampled hourly) times the hours kept")
    exclusive_cost = models.DecimalField(max_digits=16, decimal_places=2, default=0,
                                         help_text="The same held time on whole GPUs at the peak, on-demand price")
    list_cost = models.DecimalField(max_digits=16, decimal_places=2, default=0,
                                    help_text="The slice held, at the peak, on-demand price")
    cost = models.DecimalField(max_digits=16, decimal_places=2, default=0, help_text="What is billed")
    currency = models.CharField(max_length=3, default="USD")
    provisional = models.BooleanField(default=True, help_text="The hour is still open")
    computed_at = models.DateTimeField()
    reason = models.TextField(blank=True, help_text="Why an adjustment was made")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                               related_name="+")
    charge_kind = models.CharField(max_length=16, blank=True,
                                   help_text="idle-share: the workspace's share of idle and unallocated capacity "
                                             "(chargeback); blank: what it held itself")

    def save(self, *args, **kwargs):
        super().save(*args, **kwargs)
        LedgerRevision.bump()

    class Meta:
        indexes = [models.Index(fields=["workspace", "period"]), models.Index(fields=["workspace", "day"]),
                   models.Index(fields=["job", "hour"]), models.Index(fields=["provisional", "hour"])]
        ordering = ["hour", "workspace_id", "job_id", "id"]

    def __str__(self) -> str:
        return f"{self.category} {self.workspace_id} {self.hour:%Y-%m-%d %H:00} {self.cost} {self.currency}"


class LedgerCursor(models.Model):
    """Every hour before `closed_until` is final; one row."""

    closed_until = models.DateTimeField(null=True, blank=True)
    posted_until = models.DateTimeField(null=True, blank=True, help_text="The latest usage included")


class ClosedPeriod(WrittenOnce, models.Model):
    """A workspace's billing month that finance closed: its lines never change again."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.PROTECT, related_name="closed_periods")
    period = models.DateField(help_text="First day of the month")
    closed_at = models.DateTimeField()
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    total = models.DecimalField(max_digits=16, decimal_places=2)
    currency = models.CharField(max_length=3)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "period"], name="one_close_per_period")]
        ordering = ["-period"]


class WorkspaceCurrency(models.Model):
    """The currency a workspace is billed in, from a billing month on: a month's currency is that of the
    row with the latest period not after it (none: settings.BILLING_CURRENCY). Rows are written by
    billing.currency.set_workspace_currency, which never lets a month hold two currencies."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="billing_currencies")
    period = models.DateField(help_text="First day of the billing month it applies from")
    currency = models.CharField(max_length=3)
    set_at = models.DateTimeField()
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "period"], name="one_currency_per_period")]
        ordering = ["workspace_id", "period"]

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.currency} from {self.period:%Y-%m}"


class MonthlyLimit(models.Model):
    """What a workspace's and a billing account's budgets share: a monthly amount, alerts at each threshold (50,
    80 and 100 % by default), and what happens at the limit."""

    amount = models.DecimalField(max_digits=14, decimal_places=2)
    block_at_limit = models.BooleanField(default=False, help_text="Refuse new submissions once 100 % is spent")
    thresholds = models.CharField(max_length=60, default="50,80,100",
                                  help_text="Percentages that send an alert, each once a month")
    updated = ClockUpdated()

    class Meta:
        abstract = True


class ThresholdAlert(models.Model):
    """A budget's threshold crossed in one period: each model's unique constraint makes each fire once."""

    period_start = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=16, decimal_places=2)
    percent = models.DecimalField(max_digits=12, decimal_places=1, default=0)
    fired_at = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        abstract = True
        ordering = ["-fired_at", "-id"]


class Budget(MonthlyLimit):
    """A monthly spending limit for a workspace."""

    workspace = models.OneToOneField("portal.Workspace", on_delete=models.CASCADE, related_name="budget")
    currency = models.CharField(max_length=3, default="USD")
    suspend_preemptible = models.BooleanField(default=False,
                                              help_text="At 100 %, also stop the workspace's preemptible jobs")

    def __str__(self) -> str:
        return f"{self.workspace}: {self.amount} {self.currency}/month"


class BudgetAlert(ThresholdAlert):
    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    as_of = models.DateTimeField(null=True)

    class Meta(ThresholdAlert.Meta):
        constraints = [models.UniqueConstraint(fields=["budget", "period_start", "threshold"],
                                               name="one_alert_per_threshold_and_period")]


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
    created = models.DateTimeField(default=clock.now, editable=False)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]


class BillingAccount(models.Model):
    """Who pays: a legal entity or a department. It holds workspaces (AccountWorkspace); a sub-account (a
    team under a department) nests one level under an account, never deeper. Invoices, credits and
    chargeback are per account; the FOCUS export's BillingAccountId and SubAccountId follow it."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="sub_accounts",
                               help_text="The account this one is a sub-account of (one level only)")
    address = models.TextField(blank=True)
    tax_id = models.CharField(max_length=64, blank=True)
    currency = models.CharField(max_length=3)
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2, default=Decimal("0"),
                                   help_text="Percent applied to each invoice line, 0 to 100")
    invoice_prefix = models.CharField(max_length=16, blank=True)
    contacts = models.TextField(blank=True, help_text="E-mail addresses invoices go to, one per line")
    prepaid = models.BooleanField(default=False, help_text="Runs on prepaid credit instead of invoices")
    credit_started = models.DateTimeField(
        null=True, blank=True, help_text="From this hour on the workspaces' ledger lines debit the credit (set by "
                                         "the first top-up)")
    low_balance = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True,
                                      help_text="Alert owners and finance once when the credit falls to this balance")
    low_balance_alerted = models.BooleanField(default=False,
                                              help_text="The low-balance alert fired; a top-up above it clears it")
    suspend_preemptible_at_zero = models.BooleanField(
        default=False, help_text="With no credit left, also stop the workspaces' preemptible jobs")
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class AccountWorkspace(models.Model):
    """A workspace's billing account: at most one each."""

    workspace = models.OneToOneField("portal.Workspace", on_delete=models.CASCADE, related_name="billing_account_link")
    account = models.ForeignKey(BillingAccount, on_delete=models.PROTECT, related_name="workspace_links")

    class Meta:
        ordering = ["workspace_id"]

    def __str__(self) -> str:
        return f"{self.workspace_id} → {self.account_id}"


class ChargebackPolicy(models.Model):
    """Who pays for a pool's idle and unallocated capacity (billing.chargeback). No row: showback."""

    class Policy(models.TextChoices):
        SHOWBACK = "showback", _("Showback: shown, charged to no one")
        PROPORTIONAL = "proportional", _("Proportional to allocated GPU-hours")
        BY_QUOTA = "by-quota", _("By deserved quota")
        TO_ACCOUNT = "to-account", _("All to one billing account")

    pool = models.OneToOneField("scheduling.NodePool", on_delete=models.CASCADE, related_name="chargeback")
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.SHOWBACK)
    account = models.ForeignKey(BillingAccount, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                help_text="The account that pays, for the to-account policy")
    updated = ClockUpdated()

    def __str__(self) -> str:
        return f"{self.pool_id}: {self.policy}"


class ChargebackPosting(WrittenOnce, models.Model):
    """A closed month's chargeback of one pool, in the platform's currency: its priced capacity, the policy
    then, and (ChargebackShare) what each workspace was charged of the rest. Written once."""

    period = models.DateField()
    pool = models.CharField(max_length=50)
    policy = models.CharField(max_length=16)
    account = models.CharField(max_length=50, blank=True)
    currency = models.CharField(max_length=3)
    capacity_cost = models.DecimalField(max_digits=16, decimal_places=2)
    direct_cost = models.DecimalField(max_digits=16, decimal_places=2)
    posted_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["period", "pool"], name="one_chargeback_per_pool_month")]
        ordering = ["period", "pool"]


class ChargebackShare(WrittenOnce, models.Model):
    """A workspace's share of a posted pool-month, in the posting's currency, and the ledger line that
    bills it (in the workspace's own currency)."""

    posting = models.ForeignKey(ChargebackPosting, on_delete=models.PROTECT, related_name="shares")
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.PROTECT, related_name="+")
    amount = models.DecimalField(max_digits=16, decimal_places=2)
    line = models.ForeignKey(ChargeLine, null=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["posting", "workspace"], name="one_share_per_posting")]


class AccountBudget(MonthlyLimit):
    """A monthly spending limit for a billing account, in its currency: the sum of its workspaces' and its
    sub-accounts' workspaces' ledger lines. Alerts and the limit work as a workspace's Budget does."""

    account = models.OneToOneField(BillingAccount, on_delete=models.CASCADE, related_name="budget")
    suspend_preemptible = models.BooleanField(default=False,
                                              help_text="At 100 %, also stop the workspaces' preemptible jobs")

    def __str__(self) -> str:
        return f"{self.account}: {self.amount} {self.account.currency}/month"


class AccountBudgetAlert(ThresholdAlert):
    budget = models.ForeignKey(AccountBudget, on_delete=models.CASCADE, related_name="alerts")

    class Meta(ThresholdAlert.Meta):
        constraints = [models.UniqueConstraint(fields=["budget", "period_start", "threshold"],
                                               name="one_account_alert_per_threshold_and_period")]


class CreditTopUp(WrittenOnce, models.Model):
    """Prepaid credit bought for an account: written once, never edited or deleted, like a ledger line."""

    account = models.ForeignKey(BillingAccount, on_delete=models.PROTECT, related_name="top_ups")
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    currency = models.CharField(max_length=3)
    at = models.DateTimeField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="credit_top_ups")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.account}: +{self.amount} {self.currency}"


class InvoiceSequence(models.Model):
    """The last number an account used in a year, per kind of document: read and raised under a row lock in
    the transaction that writes the document, so a number is never given twice (Invoice's unique
    constraint says it again)."""

    account = models.ForeignKey(BillingAccount, on_delete=models.PROTECT, related_name="invoice_sequences")
    year = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=12)
    last = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "year", "kind"], name="one_sequence_per_account_year")]


class Invoice(WrittenOnce, models.Model):
    """An account's invoice for one billing month, or a credit note that corrects one (`corrects`). Written
    once with its lines: the account's name, address, tax id and rate are copied, so a later edit of the
    account never changes an issued document. Amounts of a credit note are positive; it subtracts."""

    class Kind(models.TextChoices):
        INVOICE = "invoice", _("Invoice")
        CREDIT_NOTE = "credit_note", _("Credit note")

    account = models.ForeignKey(BillingAccount, on_delete=models.PROTECT, related_name="invoices")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.INVOICE)
    number = models.CharField(max_length=40)
    period = models.DateField(help_text="First day of the billing month invoiced")
    issued_on = models.DateField()
    due_on = models.DateField()
    currency = models.CharField(max_length=3)
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2)
    subtotal = models.DecimalField(max_digits=16, decimal_places=2, help_text="Sum of the lines' rounded amounts")
    tax = models.DecimalField(max_digits=16, decimal_places=2, help_text="Sum of the lines' rounded taxes")
    total = models.DecimalField(max_digits=16, decimal_places=2)
    account_name = models.CharField(max_length=200)
    account_address = models.TextField(blank=True)
    account_tax_id = models.CharField(max_length=64, blank=True)
    language = models.CharField(max_length=10, help_text="The language the document is rendered in")
    corrects = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="credit_notes")
    reason = models.TextField(blank=True, help_text="Why a credit note was issued")
    issued_at = models.DateTimeField()
    issued_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "number"], name="invoice_number_once_per_account"),
            models.UniqueConstraint(fields=["account", "period"], condition=models.Q(kind="invoice"),
                                    name="one_invoice_per_account_and_period"),
        ]
        ordering = ["-issued_at", "-id"]

    def __str__(self) -> str:
        return self.number


class InvoiceLine(WrittenOnce, models.Model):
    """One workspace's sum of one service category in the month; tax on the rounded amount, rounded once."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField()
    workspace = models.ForeignKey("portal.Workspace", null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="+")
    workspace_name = models.CharField(max_length=200, blank=True)
    service = models.CharField(max_length=16, help_text="compute, storage, adjustment, credit or correction")
    description = models.CharField(max_length=500, blank=True)
    amount = models.DecimalField(max_digits=16, decimal_places=2)
    tax = models.DecimalField(max_digits=16, decimal_places=2)
    total = models.DecimalField(max_digits=16, decimal_places=2)

    class Meta:
        ordering = ["invoice_id", "position"]
        constraints = [models.UniqueConstraint(fields=["invoice", "position"], name="one_invoice_line_per_position")]


class InvoicePayment(WrittenOnce, models.Model):
    """Finance's record that an invoice was paid; the invoice itself never changes."""

    invoice = models.OneToOneField(Invoice, on_delete=models.PROTECT, related_name="payment")
    paid_on = models.DateField()
    recorded_at = models.DateTimeField()
    recorded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")


class KeepAlive(models.Model):
    """A notebook its user keeps alive until a time: the idle rule skips it until then (billing.idle.keep_alive)."""

    job = models.OneToOneField("scheduling.Job", on_delete=models.CASCADE, primary_key=True, related_name="keep_alive")
    until = models.DateTimeField(db_index=True, help_text="The idle rule skips the job until then (platform clock)")
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    set_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"job {self.job_id} kept alive until {self.until:%Y-%m-%d %H:%M %Z}"


class ExchangeRate(models.Model):
    """How many units of `quote` one unit of `base` bought on `day` (ECB style: base EUR, 1 EUR = rate quote).
    Written by billing.exchange_rates, which refuses a rate of zero or less, or one dated after today; a
    stored day's rate is never changed, so a consolidated report of the past stays the same."""

    base = models.CharField(max_length=3)
    quote = models.CharField(max_length=3)
    day = models.DateField()
    rate = models.DecimalField(max_digits=20, decimal_places=10)
    source = models.CharField(max_length=16, default="console", help_text="console, ecb-csv or command")
    created = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["base", "quote", "day"], name="one_rate_per_pair_and_day"),
                       models.CheckConstraint(condition=models.Q(rate__gt=0), name="exchange_rate_positive")]
        indexes = [models.Index(fields=["day"])]
        ordering = ["-day", "base", "quote"]

    def __str__(self) -> str:
        return f"1 {self.base} = {self.rate} {self.quote} on {self.day}"
