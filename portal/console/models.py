"""The audit log: every change operators make, from the console or the Django admin."""

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    class Source(models.TextChoices):
        CONSOLE = "console", "Console"
        ADMIN = "admin", "Django admin"

    time = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="audit_entries")
    username = models.CharField(max_length=150, help_text="Kept when the user is deleted")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CONSOLE)
    action = models.CharField(max_length=32, db_index=True, help_text="create, change, delete, cordon, drain...")
    target_type = models.CharField(max_length=64, db_index=True, help_text="app.model, e.g. scheduling.queue")
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True, help_text="field: [old, new]")
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-time", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target_type} {self.target_repr}"
