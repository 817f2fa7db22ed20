import secrets

from django.conf import settings
from django.db import models

from portal import time_zones


class Workspace(models.Model):
    """A tenant: a team, lab or company. Everything a tenant owns hangs off one."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    created = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="workspaces")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"
    FINANCE = "finance", "Finance"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="one_membership_per_user")]
        ordering = ["workspace__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @property
    def can_submit(self) -> bool:
        return self.role in (Role.OWNER, Role.MEMBER)

    @property
    def can_manage_budget(self) -> bool:
        return self.role in (Role.OWNER, Role.FINANCE)

    @property
    def can_block_submissions(self) -> bool:
        return self.role == Role.OWNER


class ApiToken(models.Model):
    """A personal API token; only its hash is stored, the raw value is shown once."""

    PREFIX = "gpt_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def new_raw_value(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class UserPreference(models.Model):
    """How the pages are shown to one user. Blank fields mean the platform's setting; the row is
    made on the first save, so a user who never chose anything has none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(max_length=64, blank=True, validators=[time_zones.validate],
                                 help_text="An IANA zone such as Asia/Shanghai; blank: the platform's (TIME_ZONE).")

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone or 'platform time zone'}"
