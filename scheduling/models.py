"""The cluster (pools, nodes, GPUs), queues, and jobs with their replicas and events."""

import re
import uuid
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from scheduling import clock, history_texts
from scheduling.core import MIG_PROFILES
from scheduling.core import model as cm
from scheduling.core.mig import MIG_CARDS, layout_errors, mig_card
from scheduling.core.units import gpu_model_name, vendor_name
from scheduling.kinds import registry as kind_registry
from scheduling.queue_tree import QueueRow, validate_queue
from scheduling.sharing import mode_of

# a Kubernetes label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

# MIG profiles by card (scheduling.core.mig holds the table and its source).
MIG_FAMILIES = {card.model: card.names for card in MIG_CARDS}
MAX_TIMESLICE_REPLICAS = 64


def said(message: str, **figures) -> str:
    """A message of scheduling.queue_tree in the reader's language."""
    text = gettext(message)
    return text % figures if figures else text


class Vendor(models.TextChoices):
    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"


class Placement(models.TextChoices):
    DEFAULT = "default", _("Default (best)")
    BINPACK = "binpack", _("Bin-pack")
    SPREAD = "spread", _("Spread")
    FRAG = "frag", _("Fragmentation-aware")


class PoolSharing(models.TextChoices):
    STANDARD = "standard", _("Exclusive and fractions")
    MIG = "mig", "MIG"
    TIMESLICE = "timeslice", _("Time-slicing")


class BucketCsiDriver(models.TextChoices):
    """How jobs on a Kubernetes pool get their buckets mounted, beside the AWS_* environment (the operator
    installs the driver: docs/operator/kubernetes.md)."""

    NONE = "", _("None: environment only")
    MOUNTPOINT_S3 = "s3.csi.aws.com", _("Mountpoint for Amazon S3 (s3.csi.aws.com)")
    CSI_S3 = "ru.yandex.s3.csi", _("csi-s3 with GeeseFS (ru.yandex.s3.csi)")


class IdleAction(models.TextChoices):
    NOTIFY = "notify", _("Notify the submitter")
    NOTIFY_THEN_STOP = "notify-then-stop", _("Notify, then stop after the grace period")


class NodePool(models.Model):
    name = models.SlugField(unique=True)
    vendor = models.CharField(max_length=8, choices=Vendor.choices, default=Vendor.NVIDIA)
    gpu_model = models.CharField(max_length=64, help_text="As labelled: nvidia.com/gpu.product, e.g. H100-80GB")
    gpu_memory_mib = models.PositiveIntegerField()
    placement = models.CharField(max_length=16, choices=Placement.choices, default=Placement.DEFAULT)
    sharing = models.CharField(max_length=16, choices=PoolSharing.choices, default=PoolSharing.STANDARD)
    timeslice_replicas = models.PositiveSmallIntegerField(default=4, validators=[MinValueValidator(1)])
    mig_layout = models.JSONField(default=list, blank=True, help_text='Instances on every GPU, e.g. ["3g.40gb", "2g.20gb"]')
    spot = models.BooleanField(default=False)
    topology_levels = models.JSONField(
        default=list, blank=True,
        help_text='Topology levels as node label keys, outermost first, e.g. ["example.com/block", '
                  '"topology.kubernetes.io/rack"]; a job asks for a level by its key or the key\'s last part')
    bucket_csi_driver = models.CharField(
        max_length=32, choices=BucketCsiDriver.choices, default=BucketCsiDriver.NONE, blank=True,
        help_text="The CSI driver that mounts a job's buckets on this pool (Kubernetes); empty: environment only")
    # Idle policy: a slice whose mean GPU utilisation stays below the threshold for the window is idle.
    deadline_discount = models.DecimalField(
        max_digits=5, decimal_places=4, null=True, blank=True,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(1))],
        help_text="0 to 1: the share taken off work priced 'by the deadline' on this pool; blank: the off-peak discount")
    idle_threshold_pct = models.PositiveSmallIntegerField(
        default=5, validators=[MaxValueValidator(100)],
        help_text="Mean GPU utilisation (% of the slice) below which a held slice counts as idle")
    idle_window_min = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="Minutes the utilisation must stay below the threshold")
    idle_action = models.CharField(max_length=20, choices=IdleAction.choices, default=IdleAction.NOTIFY)
    idle_grace_min = models.PositiveIntegerField(
        default=30, validators=[MaxValueValidator(7 * 24 * 60)],
        help_text="Notify then stop: minutes between the notice and the stop")
    idle_stop_training = models.BooleanField(
        default=False, help_text="Notify then stop applies to training jobs too (single, PyTorch, MPI); "
                                 "off: only to interactive kinds such as notebooks")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def as_core(self) -> cm.Pool:
        """The pool as the scheduler core sees it."""
        return cm.Pool(name=self.name, vendor=vendor_name(self.vendor), gpu_model=gpu_model_name(self.gpu_model),
                       gpu_memory_mib=self.gpu_memory_mib, placement=self.placement,
                       sharing=self.sharing_modes, timeslice_replicas=self.timeslice_replicas,
                       mig_layout=tuple(self.mig_layout or ()), spot=self.spot,
                       topology=tuple(self.topology_levels or ()))

    def clean(self):
        """What the scheduler core would refuse in this pool, by field."""
        errors: dict[str, list[str]] = {}
        if not 1 <= (self.timeslice_replicas or 0) <= MAX_TIMESLICE_REPLICAS:
            errors["timeslice_replicas"] = [gettext("must be a whole number from 1 to %(most)s") % {
                "most": MAX_TIMESLICE_REPLICAS}]
        if not isinstance(self.mig_layout, list):
            errors["mig_layout"] = [gettext("must be a list of MIG profiles")]
        levels = self.topology_levels
        if not isinstance(levels, list) or not all(isinstance(k, str) and LABEL_KEY.fullmatch(k) for k in levels):
            errors["topology_levels"] = [gettext("must be a list of node label keys, outermost first, e.g. "
                                                 "example.com/block, topology.kubernetes.io/rack")]
        elif len({cm.level_name(k) for k in levels}) != len(levels):
            errors["topology_levels"] = [gettext("names a level twice (a level is named by its key's last part)")]
        elif self.sharing == PoolSharing.MIG:
            errors.update(self._mig_errors())
        if not errors:
            try:
                self.as_core()
            except ValueError as error:
                text = str(error).split(": ", 1)[-1]
                where = ("mig_layout" if "mig" in text.lower() else "timeslice_replicas" if "timeslice" in text
                         else "sharing")
                errors[where] = [text]
        if errors:
            raise ValidationError(errors)

    def _mig_errors(self) -> dict[str, list[str]]:
        errors = {}
        if self.vendor != Vendor.NVIDIA:
            errors["sharing"] = [gettext("MIG is an NVIDIA feature")]
        card = mig_card(self.gpu_model, self.gpu_memory_mib)
        unknown = [p for p in self.mig_layout if p not in MIG_PROFILES]
        if unknown:
            errors["mig_layout"] = [gettext("unknown MIG profiles %(unknown)s; known: %(known)s") % {
                "unknown": ", ".join(unknown), "known": ", ".join(MIG_PROFILES)}]
        elif card is None:
            errors["mig_layout"] = [gettext("%(model)s (%(gib)s GiB) has no MIG profiles; MIG cards: %(cards)s") % {
                "model": self.gpu_model, "gib": self.gpu_memory_mib // 1024,
                "cards": ", ".join(c.model for c in MIG_CARDS)}]
        else:
            texts = {
                "not_profiles": gettext("%(wrong)s are not profiles of %(model)s (those are %(family)s)"),
                "compute_slices": gettext("the layout uses %(used)s compute slices; %(model)s has %(has)s"),
                "memory_slices": gettext("the layout uses %(used)s memory slices; %(model)s has %(has)s"),
                "too_many": gettext("%(count)s instances of %(profile)s; a GPU holds at most %(most)s"),
            }
            wrong = [texts[code] % figures for code, figures in layout_errors(card, list(self.mig_layout))]
            if wrong:
                errors["mig_layout"] = wrong
        return errors

    @property
    def sharing_modes(self) -> frozenset[str]:
        if self.sharing == PoolSharing.MIG:
            return frozenset({"mig"})
        if self.sharing == PoolSharing.TIMESLICE:
            return frozenset({"timeslice"})
        return frozenset({"exclusive", "fraction"})


class Node(models.Model):
    pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(max_length=253, unique=True)
    cpu_milli = models.PositiveIntegerField(default=64000)
    memory_mib = models.PositiveBigIntegerField(default=512 * 1024)
    ready = models.BooleanField(default=True, help_text="As the cluster says (Kubernetes' Ready condition)")
    cordoned = models.BooleanField(default=False)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    agent_version = models.CharField(max_length=64, blank=True, help_text="As its agent last reported it")
    agent_silent = models.BooleanField(
        default=False, help_text="Its agent reported once, then stayed silent past NODE_NOT_READY_AFTER_S: "
                                 "not ready until it reports again")
    labels = models.JSONField(default=dict, blank=True, help_text='The operator\'s labels, e.g. {"rack": "r12"}')

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_ready(self) -> bool:
        """Ready for the scheduler: the cluster says so and its agent is not silent."""
        return self.ready and not self.agent_silent


# Nodes the scheduler may use (Node.is_ready as a filter).
READY_NODES = models.Q(ready=True, agent_silent=False)


class Gpu(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    memory_mib = models.PositiveIntegerField()
    # Health, as the node's agent last reported it (null: not reported, or the device cannot tell).
    model = models.CharField(max_length=64, blank=True, help_text="The device's name as NVML gives it")
    util_pct = models.FloatField(null=True, blank=True, help_text="Whole-device utilisation, %")
    memory_used_mib = models.PositiveIntegerField(null=True, blank=True)
    temperature_c = models.SmallIntegerField(null=True, blank=True)
    ecc_uncorrected = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Volatile uncorrected ECC errors (since the driver loaded)")
    xid_count = models.PositiveIntegerField(null=True, blank=True, help_text="XID errors since the agent started")
    xid_last = models.PositiveIntegerField(null=True, blank=True, help_text="The last XID error code")
    health_at = models.DateTimeField(null=True, blank=True, help_text="When these figures were reported")

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="one_gpu_per_index")]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"


class Queue(models.Model):
    """A node of the queue tree. GPU amounts are in GPUs (fractions allowed)."""

    name = models.SlugField(unique=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    deserved_gpus = models.DecimalField(max_digits=10, decimal_places=2, default=0)
    over_quota_weight = models.DecimalField(max_digits=6, decimal_places=2, default=1)
    limit_gpus = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True,
                                     help_text="Empty: no limit")
    priority = models.IntegerField(default=0)
    preemptible_only = models.BooleanField(default=False, help_text="Accepts preemptible work only")
    max_termination_grace_s = models.PositiveIntegerField(
        default=600, help_text="The longest terminationGracePeriod a job of this queue may ask for, in seconds")
    workspaces = models.ManyToManyField("portal.Workspace", through="QueueAccess", related_name="queues", blank=True)
    # the longest a job of this queue runs (scheduling.lifecycle): a job without maxRuntime gets the default
    default_max_runtime_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds a job runs at most when its spec gives no maxRuntime; empty: no limit")
    max_runtime_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds a job may ask for at most (maxRuntime); empty: no limit")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        """The whole tree must stay valid with this queue as edited (rules in scheduling.queue_tree)."""
        if not self.name:
            return  # the name field reports it
        errors = validate_queue(self.tree_rows(), self.name, say=said)
        if errors:
            raise ValidationError(errors)

    def tree_rows(self) -> list[QueueRow]:
        """Every queue as a QueueRow, this one as edited (not saved yet)."""
        names = dict(Queue.objects.values_list("pk", "name"))
        if self.pk is not None:
            names[self.pk] = self.name  # sub-queues follow a rename
        jobs = Job.objects.exclude(state__in=FINAL_STATES).values_list("queue_id", flat=True)
        busy = set(jobs) | set(QueueAccess.objects.values_list("queue_id", flat=True))
        fields = ("pk", "parent_id", "deserved_gpus", "over_quota_weight", "limit_gpus")
        rows = [QueueRow(names[pk], names.get(parent), deserved, weight, limit, pk in busy)
                for pk, parent, deserved, weight, limit in Queue.objects.exclude(pk=self.pk).values_list(*fields)]
        parent = names.get(self.parent_id) if self.parent_id is not None else None
        rows.append(QueueRow(self.name, parent, self.deserved_gpus, self.over_quota_weight, self.limit_gpus,
                             self.pk in busy))
        return rows


class QueueAccess(models.Model):
    """A workspace may submit to a queue; one of its queues is its default."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE)
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="queue_access")
    is_default = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["queue", "workspace"], name="one_access_per_queue"),
            models.UniqueConstraint(fields=["workspace"], condition=models.Q(is_default=True),
                                    name="one_default_queue_per_workspace"),
        ]


class JobState(models.TextChoices):
    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    PREEMPTED = "Preempted"
    CANCELLED = "Cancelled"
    STOPPED = "Stopped"  # a notebook (or service) stopped by its owner or its idle policy: holds nothing until started
    BLOCKED = "Blocked"  # waits for the jobs its `after` names (scheduling/lifecycle/chain.py): not scheduled yet


FINAL_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
# The scheduler leaves these alone: ended, or stopped until someone starts it again (not final: it can start).
UNSCHEDULED_STATES = (*FINAL_STATES, JobState.STOPPED, JobState.BLOCKED)


class Job(models.Model):
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.PROTECT, related_name="jobs")
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                     related_name="jobs")
    name = models.CharField(max_length=200)
    job_type = models.CharField(max_length=16)
    # the kinds' registry gives the choices (scheduling.kinds): a new kind needs no migration
    kind = models.CharField(max_length=16, choices=kind_registry.choices, default=kind_registry.DEFAULT, db_index=True,
                            help_text="The spec's kind: a batch job, a notebook or an inference service")
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING, db_index=True)
    pending_reason = models.TextField(blank=True)   # rendered from pending_code and pending_params
    pending_code = models.CharField(max_length=64, blank=True, help_text="Why it waits: a code of core.fit.REASONS")
    pending_params = models.JSONField(default=dict, blank=True, help_text="The figures and names of pending_code")
    priority = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    preemptible = models.BooleanField(default=False)
    reduce_cost = models.BooleanField(default=False)
    expected_duration_s = models.PositiveIntegerField(default=3600)
    spec_text = models.TextField(help_text="What the tenant submitted")
    spec = models.JSONField(help_text="The validated, normalised spec")
    roles = models.JSONField(default=list, help_text="Per role: what the scheduler places (scheduling.spec.requests)")
    quote = models.JSONField(null=True, blank=True, help_text="The quote option frozen at submission")
    topology = models.JSONField(default=dict, blank=True,
                                help_text='Where its gang goes: {"required": "rack"}, {"preferred": "rack"} or {}')
    not_before = models.DateTimeField(null=True, blank=True,
                                      help_text="An off-peak option waits for its window, as it was quoted")
    # The platform clock, not the machine's: "submitted" is when the platform says it was.
    created = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    final_cost = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    # a run of a schedule (scheduling.schedules); null for a job submitted by hand. A deleted schedule's runs stay.
    schedule = models.ForeignKey("Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    # Dependencies and arrays (scheduling/lifecycle/chain.py and arrays.py)
    after = models.JSONField(default=list, blank=True,
                             help_text='What it waits for, resolved at submit: [{"job": id, "name": ..., "condition": ...}]')
    array = models.JSONField(default=dict, blank=True,
                             help_text='An array parent: {"indices": "0-99", "parallelism": 10, "made": n, "roles": [...]}')
    array_size = models.PositiveIntegerField(default=0, db_index=True, help_text="An array parent's indices (0: not one)")
    array_parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="array_children", help_text="The array this index belongs to")
    array_index = models.PositiveIntegerField(null=True, blank=True, help_text="ARRAY_INDEX of an array's child")
    # its life (scheduling.lifecycle): the runtime limit and the deadline of the run under way, how it ended,
    # and when its replicas are cleaned up
    max_runtime_s = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="Simulated seconds a run may last (its own or its queue's)")
    deadline = models.DateTimeField(null=True, blank=True, db_index=True,
                                    help_text="When the run under way reaches max_runtime_s (platform clock)")
    # a deadline (`completeBy` / `completeWithin`, scheduling.deadlines): when it should be done, the latest
    # start that still makes it (the cycle keeps it current), and when it was found it can no longer be met
    complete_by = models.DateTimeField(null=True, blank=True, db_index=True,
                                       help_text="When the tenant asked for it to be done (completeBy / completeWithin)")
    latest_start = models.DateTimeField(null=True, blank=True,
                                        help_text="Deadline less remaining expected run time less the safety margin")
    deadline_missed = models.DateTimeField(null=True, blank=True,
                                           help_text="When the platform found and reported the deadline can't be met")
    end_code = models.CharField(max_length=32, blank=True, help_text="How it ended: scheduling.lifecycle.ends")
    end_params = models.JSONField(default=dict, blank=True, help_text="The figures of end_code")
    cleanup_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                      help_text="ttlAfterFinished: when its replicas and pods are deleted")
    cleaned_up = models.DateTimeField(null=True, blank=True)
    # the expected-start forecast's first answer while it waited (scheduling.forecast): set against its real
    # start, it calibrates later answers for its queue
    first_forecast = models.JSONField(null=True, blank=True,
                                      help_text='The forecast\'s first answer, before calibration: '
                                                '{"asked": t, "earliest": t, "latest": t or null} (epoch seconds)')

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["workspace", "state"]),
            # the jobs each cycle reads (cycle.snapshot.scheduled_jobs): a few thousand among years of ended ones
            models.Index(fields=["id"], condition=~models.Q(state__in=UNSCHEDULED_STATES), name="job_scheduled"),
        ]

    def __str__(self) -> str:
        return f"{self.name} #{self.pk}"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES


ACTIVE_STATES = (JobState.SCHEDULED, JobState.RUNNING)


class Replica(models.Model):
    """One placement of one replica: where it ran, what slice it held, from when to when.

    A replica that is evicted and placed again gets a new row (attempt + 1), so the rows are
    the exact history billing charges for.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="replicas")
    role = models.CharField(max_length=64)
    index = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=0)
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False,
                           help_text="Identifies the replica to node agents (the pod uid on Kubernetes)")
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    end_reason = models.CharField(max_length=64, blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="replicas")
    gpu_indices = models.JSONField(default=list, blank=True)
    slice = models.JSONField(default=dict, blank=True, help_text="milli + MiB, MIG instance, time-slice or whole")
    started = models.DateTimeField(null=True, blank=True)
    ended = models.DateTimeField(null=True, blank=True)
    clock_scale = models.FloatField(default=1.0, help_text="Simulated seconds per real second (1 on a real cluster)")
    idle_since = models.DateTimeField(null=True, blank=True,
                                      help_text="Held but idle by its pool's policy since then (null: not idle)")
    idle_notified = models.DateTimeField(null=True, blank=True, help_text="When the submitter was told of this idle spell")
    # graceful eviction (scheduling/lifecycle/checkpoints.py)
    lost_gpu_hours = models.DecimalField(max_digits=14, decimal_places=4, default=0,
                                         help_text="GPU-hours of work its eviction lost (since its last checkpoint)")
    held_until = models.DateTimeField(null=True, blank=True, db_index=True,
                                      help_text="Evicted, its pod still stopping: its resources held until then at most")
    revision = models.PositiveIntegerField(null=True, blank=True,
                                           help_text="An inference service's revision this placement launched")

    class Meta:
        ordering = ["job_id", "role", "index", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["job", "role", "index", "attempt"], name="one_replica_per_attempt"),
            models.UniqueConstraint(fields=["job", "role", "index"], condition=models.Q(state__in=ACTIVE_STATES),
                                    name="one_active_placement_per_replica"),
        ]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.role}-{self.index}#{self.attempt}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def slice_label(self) -> str:
        """What the replica holds, for people: "2 GPUs", "0.5 GPU", "0.5 GPU + 10 GiB", "MIG 3g.40gb"..."""
        return mode_of(self.slice).label(self.slice or {}, len(self.gpu_indices))


class JobAttempt(models.Model):
    """One run of a job, from its start to its end, and how it ended (scheduling.lifecycle.attempts): the
    record retries count and the job page lists. Evictions end one too, but are never `counted`."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField(help_text="1, 2, ...")
    started = models.DateTimeField()
    ended = models.DateTimeField(null=True, blank=True)
    end_class = models.CharField(max_length=32, blank=True, help_text="An end code; empty while it runs")
    exit_code = models.IntegerField(null=True, blank=True)
    memory_mib = models.PositiveIntegerField(null=True, blank=True, help_text="The memory limit an OOM hit")
    node = models.CharField(max_length=253, blank=True)
    counted = models.BooleanField(default=False, help_text="Counts against the spec's retry.limit")

    class Meta:
        ordering = ["job_id", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="one_attempt_per_number")]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.number} {self.end_class or 'running'}"


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    kind = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=JobState.choices, blank=True)
    reason = models.TextField(blank=True, help_text="In English, as written")
    said = models.JSONField(null=True, blank=True,
                            help_text="The reason as a msgid and its figures (scheduling.history_texts), for "
                                      "readers of other languages; empty on rows written before it was kept")
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.job_id} {self.kind} {self.state}"

    @property
    def reason_text(self) -> str:
        """The reason in the active language (the stored English text when it cannot be rendered)."""
        return history_texts.text(self.said, self.reason)

    @property
    def kind_label(self) -> str:
        label = EVENT_KINDS.get(self.kind)
        return str(label) if label else self.kind


# What an event's kind reads as on the pages (the API keeps `kind` as it is).
EVENT_KINDS = {
    "submitted": pgettext_lazy("job event", "submitted"),
    "scheduled": pgettext_lazy("job event", "scheduled"),
    "running": pgettext_lazy("job event", "running"),
    "grown": pgettext_lazy("job event", "grown"),
    "shrunk": pgettext_lazy("job event", "shrunk"),
    "pending": pgettext_lazy("job event", "waiting"),
    "preempted": pgettext_lazy("job event", "preempted"),
    "requeued": pgettext_lazy("job event", "requeued"),
    "succeeded": pgettext_lazy("job event", "succeeded"),
    "failed": pgettext_lazy("job event", "failed"),
    "cancelled": pgettext_lazy("job event", "cancelled"),
    "priority-changed": pgettext_lazy("job event", "priority changed"),
    "queue-changed": pgettext_lazy("job event", "queue changed"),
    "stopped": pgettext_lazy("job event", "stopped"),
    "start-requested": pgettext_lazy("job event", "start requested"),
    "idle": pgettext_lazy("job event", "idle"),
    "scaled": pgettext_lazy("job event", "scaled"),
    "woken": pgettext_lazy("job event", "woken"),
    "cold-start": pgettext_lazy("job event", "cold start"),
    "rescaled": pgettext_lazy("job event", "replica range changed"),
    # dependencies and arrays (scheduling.lifecycle)
    "released": pgettext_lazy("job event", "released"),
    "index-cancelled": pgettext_lazy("job event", "index cancelled"),
    "retrying": pgettext_lazy("job event", "retrying"),
    "cleaned-up": pgettext_lazy("job event", "cleaned up"),
    "limits": pgettext_lazy("job event", "limits changed"),
}


class HeartbeatWatch(models.Model):
    """One row: since when the platform has checked its agents' heartbeats without a gap. A silence is
    counted from this at the earliest, so a platform that was itself down does not take its own absence
    for its nodes' (scheduling.health)."""

    since = models.DateTimeField()
    checked = models.DateTimeField()


class SimulatedPod(models.Model):
    """A replica running on the simulated cluster (the embedded default backend)."""

    job_id = models.BigIntegerField()
    role = models.CharField(max_length=64)
    index = models.PositiveIntegerField()
    node = models.CharField(max_length=253)
    image = models.CharField(max_length=500, blank=True)
    gpus = models.JSONField(default=list)
    launched = models.DateTimeField()
    job_started = models.DateTimeField(help_text="First launch of any replica of the job: they finish together")
    run_seconds = models.FloatField(help_text="Expected duration divided by the clock speed-up")
    fails = models.BooleanField(default=False)
    exit_code = models.PositiveSmallIntegerField(default=1, help_text="What a failing pod exits with (SIM_EXIT_CODE)")
    fail_after_s = models.FloatField(null=True, blank=True, help_text="Fails this long after it runs (SIM_FAIL_AFTER)")
    kind = models.CharField(max_length=16, default=kind_registry.DEFAULT, help_text="The job's kind")
    process = models.BooleanField(default=False, help_text="False: runs for its duration; True: a real local "
                                  "process (backends/simulated/processes.py) that runs until stopped")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_id", "role", "index"], name="one_sim_pod_per_replica")]


class ReplicaLog(models.Model):
    """A replica placement's log, read from the backend before its pod was deleted (the pod's log goes with
    it). Kept JOB_LOG_RETENTION_DAYS; a job's logs hold at most JOB_LOG_MAX_BYTES (scheduling.logs)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="logs")
    role = models.CharField(max_length=64)
    index = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=0)
    node = models.CharField(max_length=253, blank=True)
    text = models.TextField(blank=True)
    size = models.PositiveIntegerField(default=0, help_text="Bytes of text in UTF-8, counted against the job's cap")
    truncated = models.BooleanField(default=False)
    captured_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["job_id", "role", "index", "attempt"]
        constraints = [models.UniqueConstraint(fields=["job", "role", "index", "attempt"], name="one_log_per_attempt")]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.name}#{self.attempt}"

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


class ServiceScale(models.Model):
    """An inference service's replica range and what its autoscaler decided (scheduling.inference).

    The scheduler places `Job.roles`, which the autoscaler rewrites: min max(1, min_replicas) and max
    `desired`; a service that scales to zero is Stopped, and the endpoint's first request starts it."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="service_scale")
    min_replicas = models.PositiveSmallIntegerField(help_text="0: scales to zero after its scale-down delay")
    max_replicas = models.PositiveSmallIntegerField()
    desired = models.PositiveSmallIntegerField(default=0)
    reason = models.CharField(max_length=200, blank=True, help_text="Why the autoscaler wants `desired`")
    recommendations = models.JSONField(default=list, help_text="[[epoch seconds, replicas]] within the delay")
    counters = models.JSONField(default=dict, help_text="Per replica, the last scrape of its cumulative counters")
    scraped_at = models.DateTimeField(null=True, blank=True)
    woken_at = models.DateTimeField(null=True, blank=True, help_text="A request arrived while at zero (cold start)")
    cold_starts = models.PositiveIntegerField(default=0)
    revision = models.PositiveIntegerField(default=1, help_text="The revision new replicas launch (Job.spec is its spec)")
    traffic = models.JSONField(default=list, blank=True,
                               help_text="[{revision, percent}]: how the endpoint splits requests; empty: all to "
                                         "`revision`")
    # Limits over all its callers together (its spec's `limits`, changed from its page or the API); each key
    # may have lower ones of its own. Empty: none.
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveBigIntegerField(null=True, blank=True,
                                                       help_text="Prompt and completion tokens together")


class ServiceSample(models.Model):
    """One autoscaler evaluation of a service: what its replicas did since the previous one."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="service_samples")
    at = models.DateTimeField(db_index=True)
    seconds = models.FloatField(help_text="Since the previous sample")
    replicas = models.PositiveSmallIntegerField(help_text="Running when sampled")
    desired = models.PositiveSmallIntegerField()
    requests = models.PositiveIntegerField(default=0, help_text="Answered since the previous sample")
    concurrency = models.FloatField(default=0.0, help_text="Mean requests in flight")
    p50_ms = models.FloatField(null=True, blank=True)
    p95_ms = models.FloatField(null=True, blank=True)
    gpu_seconds = models.FloatField(default=0.0, help_text="GPU share held by its replicas times the seconds")
    cold_start_s = models.FloatField(null=True, blank=True, help_text="A replica started from zero, this long")
    waiting = models.PositiveIntegerField(default=0, help_text="Requests queued on its replicas when sampled")
    ttft_p50_ms = models.FloatField(null=True, blank=True, help_text="Time to first token, from the servers' histograms")
    ttft_p95_ms = models.FloatField(null=True, blank=True)
    prefill_seconds = models.FloatField(default=0.0, help_text="Prefill time its servers reported in the window")
    decode_seconds = models.FloatField(default=0.0, help_text="Decode time its servers reported in the window")

    class Meta:
        ordering = ["job_id", "at"]
        indexes = [models.Index(fields=["job", "at"])]


class ServiceRevision(models.Model):
    """One version of an inference service: a change of its model or image makes the next number. The service's
    `Job.spec` is the spec of `ServiceScale.revision`, which new replicas launch; replicas already running keep
    the revision they launched (`Replica.revision`) and serve it until they end."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="service_revisions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(help_text="The service's clean-form spec at this revision")
    model = models.CharField(max_length=300, blank=True, help_text="Its model: path, registry reference or name")
    image = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(default=clock.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["job_id", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="one_service_revision_per_number")]

    def __str__(self) -> str:
        return f"{self.job_id} r{self.number}"


class ServiceTokenUsage(models.Model):
    """Tokens an inference service answered in one minute, per key, replica and revision: the endpoint adds each
    answer's `usage` to its minute's row (one upsert per answer), with the phase seconds and time to first token
    its replica reported when it reports them."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="token_usage")
    minute = models.DateTimeField(help_text="The minute (UTC) the answers ended in")
    key_id = models.PositiveBigIntegerField(null=True, blank=True, help_text="The service key called with; null: a "
                                                                             "member's token")
    replica = models.CharField(max_length=80, blank=True, help_text="role-index-attempt of the replica that answered")
    revision = models.PositiveIntegerField(null=True, blank=True)
    requests = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    prefill_seconds = models.FloatField(default=0.0)
    decode_seconds = models.FloatField(default=0.0)
    ttft_seconds = models.FloatField(default=0.0, help_text="Sum of the answers' times to first token")
    ttft_count = models.PositiveIntegerField(default=0, help_text="Answers with a time to first token")

    class Meta:
        ordering = ["job_id", "minute"]
        indexes = [models.Index(fields=["job", "minute"])]


class OffPeakCalendar(models.Model):
    """The cheap hours of one price timeline from an instant on. Billing writes a row per price version
    (the calendar is its currency, see billing.offpeak_sync); the scheduler reads them
    (scheduling.offpeak_calendar) to run ReduceCost work off-peak."""

    calendar = models.CharField(max_length=16, help_text="The price timeline: billing's currency code")
    effective_from = models.DateTimeField()
    windows = models.CharField(max_length=200, blank=True, help_text="HH:MM-HH:MM, comma-separated; empty: none")
    time_zone = models.CharField(max_length=64, blank=True, help_text="The zone the windows are read in; "
                                                                      "blank: the platform's")

    class Meta:
        ordering = ["calendar", "effective_from"]
        constraints = [models.UniqueConstraint(fields=["calendar", "effective_from"],
                                               name="one_off_peak_version_per_calendar_and_time")]

    def __str__(self) -> str:
        return f"{self.calendar} from {self.effective_from:%Y-%m-%d %H:%M}: {self.windows or 'no off-peak'}"


class WorkspaceCalendar(models.Model):
    """The calendar a workspace's off-peak work follows from a month on (none: the platform's). Billing
    writes it with the workspace's billing currency."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="off_peak_calendars")
    period = models.DateField(help_text="First day of the month it applies from")
    calendar = models.CharField(max_length=16)

    class Meta:
        ordering = ["workspace_id", "period"]
        constraints = [models.UniqueConstraint(fields=["workspace", "period"], name="one_calendar_per_period")]

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.calendar} from {self.period:%Y-%m}"


class EncryptedValue(models.Model):
    """What an encrypted workspace value shows instead of itself: when it was made, and who changed it when."""

    created = models.DateTimeField(default=clock.now, editable=False)
    changed = models.DateTimeField(default=clock.now)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    changed_by_name = models.CharField(max_length=150, blank=True, help_text="Kept when the user is deleted")

    class Meta:
        abstract = True


class WorkspaceSecret(EncryptedValue):
    """A value a workspace's jobs read (a token, a key file), stored encrypted (scheduling.secrets); write-only:
    the pages and the API show its name and who changed it when, never the value."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=63, help_text="A DNS label: what a spec's env or secretMounts names")
    ciphertext = models.TextField(help_text="The value, a Fernet token under SECRETS_KEY")
    size = models.PositiveIntegerField(help_text="Bytes of the value in UTF-8")

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_secret_per_name")]


# --------------------------------------------------------------------------- volumes and datasets


class AccessMode(models.TextChoices):
    READ_WRITE_ONCE = "ReadWriteOnce", _("ReadWriteOnce: one node at a time")
    READ_WRITE_MANY = "ReadWriteMany", _("ReadWriteMany: many nodes at once")


class Volume(models.Model):
    """A workspace's persistent volume, mounted by name from a job's spec (scheduling/storage.py)."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="volumes")
    name = models.SlugField(max_length=63)
    size_gib = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    storage_class = models.CharField(max_length=63, default="standard")
    access_mode = models.CharField(max_length=16, choices=AccessMode.choices, default=AccessMode.READ_WRITE_ONCE)
    created = models.DateTimeField(default=clock.now, editable=False)
    # a notebook's home (named home-<notebook>): made when the first notebook of that name is submitted, kept
    # when it stops or is deleted; empty for a volume made by hand
    home_of = models.CharField(max_length=63, blank=True, default="",
                               help_text="The notebook whose home this volume is (empty: an ordinary volume)")

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_volume_per_name"),
                       models.UniqueConstraint(fields=["workspace", "home_of"], condition=~models.Q(home_of=""),
                                               name="one_home_per_notebook")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.name} ({self.size_gib} GiB)"


class StorageQuota(models.Model):
    """The most GiB a workspace's volumes may hold together (no row: no limit). Operators set it."""

    workspace = models.OneToOneField("portal.Workspace", on_delete=models.CASCADE, related_name="storage_quota")
    limit_gib = models.PositiveIntegerField(help_text=_("Total size of the workspace's volumes, GiB"))

    def __str__(self) -> str:
        return f"{self.workspace_id}: {self.limit_gib} GiB"


class Dataset(models.Model):
    """A named series of read-only snapshots of a volume (its versions), owned by one workspace."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="datasets")
    name = models.SlugField(max_length=63)
    created = models.DateTimeField(default=clock.now, editable=False)
    shared_with = models.ManyToManyField("portal.Workspace", through="DatasetGrant", related_name="granted_datasets",
                                         blank=True)

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_dataset_per_name")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.name}"


class RegistryCredential(EncryptedValue):
    """How a workspace's pods pull images from one registry (an imagePullSecret on Kubernetes); the password
    or token is stored encrypted as a secret's value is."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="registry_credentials")
    server = models.CharField(max_length=253, help_text="The registry host (and port), e.g. registry.example.com")
    username = models.CharField(max_length=200)
    ciphertext = models.TextField(help_text="The password or token, a Fernet token under SECRETS_KEY")

    class Meta:
        ordering = ["workspace_id", "server"]
        constraints = [models.UniqueConstraint(fields=["workspace", "server"], name="one_credential_per_registry")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.server}"


class WorkspaceBucket(models.Model):
    """An S3-compatible bucket (or a prefix in one) a workspace registered under a name its jobs' specs use
    (scheduling/buckets.py). The access key id and secret access key are two of the workspace's secrets,
    named here: their values are stored once, encrypted, and never shown."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="buckets")
    name = models.SlugField(max_length=63, help_text="What a spec's `buckets` names")
    endpoint = models.CharField(max_length=2048, help_text="The store's http(s) URL, e.g. https://s3.example.com")
    bucket = models.CharField(max_length=63, help_text="The bucket's name in the store")
    prefix = models.CharField(max_length=1024, blank=True, help_text="The key prefix the workspace uses in it")
    region = models.CharField(max_length=32, default="us-east-1")
    access_key_id_secret = models.CharField(max_length=63, help_text="The secret holding the access key id")
    secret_access_key_secret = models.CharField(max_length=63,
                                                help_text="The secret holding the secret access key")
    created = models.DateTimeField(default=clock.now, editable=False)
    created_by_name = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_bucket_per_name")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.name}"


class DatasetVersion(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    source_volume = models.CharField(max_length=63, help_text=_("The volume it was copied from"))
    size_bytes = models.PositiveBigIntegerField(default=0)
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["dataset_id", "number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="one_dataset_version_per_number")]

    def __str__(self) -> str:
        return f"{self.dataset.name}@v{self.number}"


class DatasetGrant(models.Model):
    """Another workspace may mount the dataset's versions, read-only."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="grants")
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="dataset_grants")
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "workspace"], name="one_grant_per_workspace")]


# --------------------------------------------------------------------------- schedules
# A spec with `schedule:` makes a Schedule; its runs are ordinary jobs (Job.schedule) made at its fire times
# (scheduling.schedules). Each fire time is recorded once (ScheduleFiring), with what became of it.

class Concurrency(models.TextChoices):
    FORBID = "Forbid", _("Forbid: skip a run while the previous one is unfinished")
    REPLACE = "Replace", _("Replace: cancel the unfinished run and start the new one")
    ALLOW = "Allow", _("Allow: runs may overlap")


class Schedule(models.Model):
    workspace = models.ForeignKey("portal.Workspace", on_delete=models.PROTECT, related_name="schedules")
    name = models.CharField(max_length=200, help_text="The spec's name; each run is a job of this name")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="schedules", help_text="Runs are submitted as this user")
    cron = models.CharField(max_length=200, help_text="Five cron fields or a nickname (@daily), read in time_zone")
    time_zone = models.CharField(max_length=64, help_text="An IANA zone; the platform's when the spec named none")
    concurrency = models.CharField(max_length=8, choices=Concurrency.choices, default=Concurrency.FORBID)
    keep_last = models.PositiveSmallIntegerField(default=10, help_text="Finished runs the schedule lists")
    suspended = models.BooleanField(default=False)
    spec_text = models.TextField(help_text="What the tenant submitted, its schedule block included")
    spec = models.JSONField(help_text="The validated, normalised spec of each run (without the schedule block)")
    quote = models.JSONField(null=True, blank=True, help_text="The quote option frozen when the schedule was made")
    next_fire_at = models.DateTimeField(null=True, blank=True, help_text="The next fire time; null while suspended")
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["suspended", "next_fire_at"])]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_schedule_per_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron} {self.time_zone})"


class FiringOutcome(models.TextChoices):
    STARTED = "started", _("Run started")
    SKIPPED_RUNNING = "skipped_running", _("Skipped: the previous run is unfinished")
    MISSED = "missed", _("Missed: the platform was down for more than an interval")
    REFUSED = "refused", _("Refused")


class ScheduleFiring(models.Model):
    """One fire time of a schedule and what became of it; unique per schedule and time, so two workers that
    fire the same schedule make its run once."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="firings")
    fire_time = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=FiringOutcome.choices)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    detail = models.TextField(blank=True, help_text="Why a run was refused, as the refusal said it")
    recorded = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["-fire_time", "-id"]
        constraints = [models.UniqueConstraint(fields=["schedule", "fire_time"], name="one_firing_per_time")]
