"""The audit log: every change operators make, from the console or the Django admin; queue allocation
samples; the capacity planner's runs."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from scheduling.api import clock, history_texts

# What an entry's action reads as (the stored action, the filter's value and the CSV's column stay as they are).
ACTION_LABELS = {
    "create": pgettext_lazy("audit action", "create"),
    "change": pgettext_lazy("audit action", "change"),
    "update": pgettext_lazy("audit action", "update"),
    "delete": pgettext_lazy("audit action", "delete"),
    "cordon": pgettext_lazy("audit action", "cordon"),
    "uncordon": pgettext_lazy("audit action", "uncordon"),
    "drain": pgettext_lazy("audit action", "drain"),
    "not ready": pgettext_lazy("audit action", "not ready"),
    "ready": pgettext_lazy("audit action", "ready"),
    "idle policy": pgettext_lazy("audit action", "idle policy"),
    "revoke": pgettext_lazy("audit action", "revoke"),
    "set currency": pgettext_lazy("audit action", "set currency"),
    "grant queue": pgettext_lazy("audit action", "grant queue"),
    "adjust": pgettext_lazy("audit action", "adjust"),
    "close period": pgettext_lazy("audit action", "close period"),
    "reactivate": pgettext_lazy("audit action", "reactivate"),
    "deactivate": pgettext_lazy("audit action", "deactivate"),
    "reset password": pgettext_lazy("audit action", "reset password"),
    "end sessions": pgettext_lazy("audit action", "end sessions"),
    "anonymise": pgettext_lazy("audit action", "anonymise"),
    "cancel": pgettext_lazy("audit action", "cancel"),
    "requeue": pgettext_lazy("audit action", "requeue"),
    "change priority": pgettext_lazy("audit action", "change priority"),
    "move queue": pgettext_lazy("audit action", "move queue"),
    "login failed": pgettext_lazy("audit action", "login failed"),
    "invite": pgettext_lazy("audit action", "invite"),
    "resend invitation": pgettext_lazy("audit action", "resend invitation"),
    "revoke invitation": pgettext_lazy("audit action", "revoke invitation"),
    "accept invitation": pgettext_lazy("audit action", "accept invitation"),
    "approve device login": pgettext_lazy("audit action", "approve device login"),
    "deny device login": pgettext_lazy("audit action", "deny device login"),
    "keep alive": pgettext_lazy("audit action", "keep alive"),
}


def action_label(action: str) -> str:
    label = ACTION_LABELS.get(action)
    return str(label) if label else action


class AuditEntry(models.Model):
    class Source(models.TextChoices):
        CONSOLE = "console", _("Console")
        ADMIN = "admin", _("Django admin")
        TENANT = "tenant", _("Workspace pages")  # an owner managing their own workspace
        SIGN_IN = "sign-in", _("Sign-in")  # a failed sign-in, on /login/ or /admin/login/

    time = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="audit_entries")
    username = models.CharField(max_length=150, help_text="Kept when the user is deleted")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CONSOLE)
    action = models.CharField(max_length=32, db_index=True, help_text="create, change, delete, cordon, drain...")
    target_type = models.CharField(max_length=64, db_index=True, help_text="app.model, e.g. scheduling.queue")
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True, help_text="field: [old, new]")
    message = models.TextField(blank=True, help_text="In English, as written")
    said = models.JSONField(null=True, blank=True,
                            help_text="The message as a msgid and its figures (scheduling.history_texts), for "
                                      "readers of other languages; empty on rows written before it was kept")

    class Meta:
        ordering = ["-time", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target_type} {self.target_repr}"

    @property
    def action_label(self) -> str:
        return action_label(self.action)

    @property
    def message_text(self) -> str:
        """The message in the active language (the stored English text when it cannot be rendered)."""
        return history_texts.text(self.said, self.message)


class QueueAllocationSample(models.Model):
    """One queue's GPUs at one moment, sampled by the beat (`QUEUE_HISTORY_INTERVAL_S`) for the
    console's 7-day chart; kept `QUEUE_HISTORY_RETENTION_DAYS`."""

    queue = models.ForeignKey("scheduling.Queue", on_delete=models.CASCADE, related_name="allocation_samples")
    time = models.DateTimeField(help_text="The platform clock when sampled")
    allocated_gpus = models.DecimalField(max_digits=12, decimal_places=3, help_text="Held by the queue's subtree")
    deserved_gpus = models.DecimalField(max_digits=12, decimal_places=3, help_text="Its deserved quota then")
    fair_share_gpus = models.DecimalField(max_digits=12, decimal_places=3,
                                          help_text="What the scheduler's water-filling gave it then")

    class Meta:
        ordering = ["queue", "time"]
        constraints = [models.UniqueConstraint(fields=["queue", "time"], name="one_sample_per_queue_and_time")]
        indexes = [models.Index(fields=["time"])]

    def __str__(self) -> str:
        return f"{self.queue_id} {self.time:%Y-%m-%d %H:%M} {self.allocated_gpus}/{self.deserved_gpus}"


class PlannerRun(models.Model):
    """One capacity-planner replay (portal/console/planner.py): its inputs, its progress while a Celery
    worker runs it, and its figures. Operators may save a run under a name to compare it later."""

    class Kind(models.TextChoices):
        WHATIF = "whatif", _("What-if on the platform's history")
        TRACE = "trace", _("What-if on an uploaded trace")
        SAVINGS = "savings", _("Pool against silos (last 30 days)")

    class State(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.WHATIF)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    # Never the same for two runs: Celery workers remember revoked ids, and a primary key can be given again
    # (a database restored from a backup), so an id made of the key alone could name a new run revoked before.
    task_id = models.CharField(max_length=64, blank=True, editable=False,
                               help_text="The id its Celery task was sent under, to revoke it when it is cancelled")
    created = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="planner_runs")
    name = models.CharField(max_length=120, blank=True, help_text="Given when saved")
    saved = models.BooleanField(default=False, db_index=True)
    inputs = models.JSONField(default=dict, help_text="The edits, the window and the replay settings")
    trace_csv = models.TextField(blank=True, help_text="An uploaded Philly-format trace (kind trace)")
    progress = models.FloatField(default=0.0, help_text="0 to 1 while it runs")
    results = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"planner run {self.pk} ({self.kind}, {self.state})"
