import secrets
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal import time_zones
from scheduling.api import clock


class Workspace(models.Model):
    """A tenant: a team, lab or company. Everything a tenant owns hangs off one."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    created = models.DateTimeField(default=clock.now, editable=False)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="workspaces")
    ssh_enabled = models.BooleanField(default=True, help_text="Owners and members may open SSH sessions into "
                                                              "the workspace's notebooks and jobs")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Role(models.TextChoices):
    OWNER = "owner", _("Owner")
    MEMBER = "member", _("Member")
    VIEWER = "viewer", _("Viewer")
    FINANCE = "finance", _("Finance")


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(default=clock.now, editable=False)
    # "" when made by hand; else the company sign-in whose groups gave it ("oidc:<provider>", "ldap", "scim"),
    # which removes it again when the groups stop giving it (portal.identity.groups)
    source = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="one_membership_per_user")]
        ordering = ["workspace__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    def clean(self) -> None:
        """A service account's user is a member of its own workspace only, never as owner (the Django admin's
        forms check this; the portal's services never make such a membership)."""
        account = ServiceAccount.objects.filter(user_id=self.user_id).first() if self.user_id else None
        if account is not None and (self.workspace_id != account.workspace_id or self.role not in ServiceAccount.ROLES):
            raise ValidationError(gettext("%(user)s is a service account of %(workspace)s: a member or viewer of it "
                                          "only") % {"user": account.user.username, "workspace": account.workspace.slug})

    @property
    def can_submit(self) -> bool:
        return self.role in (Role.OWNER, Role.MEMBER)

    @property
    def can_manage_budget(self) -> bool:
        return self.role in (Role.OWNER, Role.FINANCE)

    @property
    def can_block_submissions(self) -> bool:
        return self.role == Role.OWNER

    @property
    def can_manage_members(self) -> bool:
        return self.role == Role.OWNER

    @property
    def can_manage_secrets(self) -> bool:
        """Owners write secrets and registry credentials; members name them in specs (can_submit); viewers and
        finance see the names only."""
        return self.role == Role.OWNER


class TokenScope(models.TextChoices):
    """What an API token may do; each scope includes the ones before it."""

    READ = "read", _("Read: GET requests only")
    SUBMIT = "submit", _("Submit: read, and submit and cancel jobs")
    MANAGE = "manage", _("Manage: everything the user may do")

    @classmethod
    def rank(cls, scope: str) -> int:
        return list(cls.values).index(scope)


class ApiToken(models.Model):
    """A personal API token; only its hash is stored, the raw value is shown once."""

    PREFIX = "gpt_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created = models.DateTimeField(default=clock.now, editable=False)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    # Tokens made before scopes existed could submit and cancel: they keep exactly that.
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.SUBMIT)
    expires = models.DateTimeField(null=True, blank=True,
                                   help_text="Refused from then on; empty: never (tokens made before expiry existed)")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    def allows(self, scope: str) -> bool:
        return TokenScope.rank(self.scope) >= TokenScope.rank(scope)

    def expired_at(self, now) -> bool:
        return self.expires is not None and self.expires <= now

    @classmethod
    def new_raw_value(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class ServiceKey(models.Model):
    """An inference service's own API key: it opens that service's endpoint (`/serve/`) and nothing else,
    for an application that calls the model (no person, no REST API). Only its hash is stored; the raw
    value is shown once. It may have request and token limits lower than the service's."""

    PREFIX = "gsk_"

    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="service_keys")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell keys apart.")
    created = models.DateTimeField(default=clock.now, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    expires = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never")
    revoked = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: the service's")
    tokens_per_minute = models.PositiveBigIntegerField(null=True, blank=True, help_text="Empty: the service's")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    def refused_at(self, now) -> bool:
        return self.revoked is not None or (self.expires is not None and self.expires <= now)

    @classmethod
    def new_raw_value(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class ServiceAccount(models.Model):
    """A workspace's non-person identity for CI pipelines and automation on the REST API. It is backed by
    an account of its own (username `svc:<name>@<workspace>`, no password, so it cannot sign in) with one
    membership, as member or viewer: its tokens belong to that account, so they act only within the
    workspace, are audited under its name, and outlive whoever made them."""

    USERNAME_PREFIX = "svc:"
    ROLES = (Role.MEMBER, Role.VIEWER)  # never owner: an automation must not manage people or money

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="service_accounts")
    name = models.SlugField(max_length=40, help_text="Lowercase letters, digits and '-', e.g. ci-pipeline")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_account")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="The owner who made it; its tokens do not depend on them")
    created = models.DateTimeField(default=clock.now, editable=False)
    deleted = models.DateTimeField(null=True, blank=True,
                                   help_text="Its tokens revoked and its membership removed; the name may be made again")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="one_service_account_name_per_workspace")]
        ordering = ["workspace__slug", "name"]

    def __str__(self) -> str:
        return self.username_for(self.workspace.slug, self.name)

    @classmethod
    def username_for(cls, workspace_slug: str, name: str) -> str:
        return f"{cls.USERNAME_PREFIX}{name}@{workspace_slug}"


class UserPreference(models.Model):
    """How the pages are shown to one user. Blank fields mean the platform's setting; the row is
    made on the first save, so a user who never chose anything has none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(max_length=64, blank=True, validators=[time_zones.validate],
                                 help_text="An IANA zone such as Asia/Shanghai; blank: the platform's (TIME_ZONE).")
    language = models.CharField(max_length=16, blank=True, choices=settings.LANGUAGES,
                                help_text="The interface language; blank: the browser's (Accept-Language).")

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone or 'platform time zone'}"


class NotificationEvent(models.TextChoices):
    """What a user or a workspace's webhook is told about. The value is the webhook's `event`."""

    JOB_STARTED = "job.started", _("A job of mine starts running")
    JOB_FINISHED = "job.finished", _("A job of mine ends (succeeded or cancelled)")
    JOB_FAILED = "job.failed", _("A job of mine fails")
    BUDGET_ALERT = "budget.alert", _("A workspace budget threshold is crossed (owners and finance)")
    IDLE_NOTICE = "idle.notice", _("A job of mine holds idle GPUs")
    JOB_DEADLINE = "job.deadline", _("A deadline of a job of mine can no longer be met")


class NotificationPreference(models.Model):
    """One user's choice for one event; a user without a row has DEFAULT_CHANNELS."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_choices")
    event = models.CharField(max_length=16, choices=NotificationEvent.choices)
    email = models.BooleanField()
    in_app = models.BooleanField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "event"], name="one_choice_per_user_and_event")]

    def __str__(self) -> str:
        return f"{self.user} {self.event}: email={self.email} in_app={self.in_app}"


class Notification(models.Model):
    """One notice to one user: shown in the app (in_app) and/or e-mailed (email_state)."""

    class EmailState(models.TextChoices):
        NONE = "", "Not e-mailed"
        PENDING = "pending", "To send"
        SENT = "sent", "Sent"
        FAILED = "failed", "Could not be sent"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    workspace = models.ForeignKey(Workspace, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="notifications")
    event = models.CharField(max_length=16, choices=NotificationEvent.choices)
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=200, blank=True, help_text="A page of the portal, e.g. /jobs/12/")
    created = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    in_app = models.BooleanField(default=True)
    read = models.DateTimeField(null=True, blank=True)
    email_state = models.CharField(max_length=8, choices=EmailState.choices, blank=True, default=EmailState.NONE)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["user", "in_app", "read"]),
                   models.Index(fields=["email_state"], condition=models.Q(email_state="pending"),
                                name="notification_email_pending")]

    def __str__(self) -> str:
        return f"{self.user}: {self.subject}"


class Webhook(models.Model):
    """A workspace's webhook: its events as JSON, signed with the secret (HMAC-SHA256)."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=80, help_text="The HMAC key; shown to the owner once")
    active = models.BooleanField(default=True)
    created = models.DateTimeField(default=clock.now, editable=False)

    def __str__(self) -> str:
        return f"{self.workspace}: {self.url}"

    @staticmethod
    def new_secret() -> str:
        return "whsec_" + secrets.token_urlsafe(32)


class WebhookDelivery(models.Model):
    """One event for one webhook: its exact signed body, and how the attempts went."""

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        DELIVERED = "delivered", _("Delivered")
        FAILED = "failed", _("Failed")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=16)
    body = models.TextField(help_text="The JSON sent, byte for byte what the signature covers")
    created = models.DateTimeField(default=clock.now, editable=False, db_index=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The receiver's HTTP status")
    last_error = models.CharField(max_length=300, blank=True)
    delivered = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "webhook deliveries"

    # last_error holds one of these words, never how a connection failed (that would make a port scanner of it)
    REFUSED, FAILED_ANSWER = "refused", "failed"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id}: {self.state}"

    @property
    def last_answer(self) -> str:
        """What the owner is told of the last attempt: delivered, refused or failed, never the status or the
        error (rows written before this rule kept them: they read "failed")."""
        if self.state == self.State.DELIVERED:
            return gettext("delivered")
        if self.last_error == self.REFUSED:
            return gettext("refused: the URL is not one the platform calls (an internal address)")
        if self.last_error or self.last_status:
            return gettext("failed")
        return ""


class LoginBackoff(models.Model):
    """Failed sign-ins of one username (portal.login_backoff): after a few, each further one makes the
    account wait twice as long as the last (capped), whatever address the next try comes from."""

    username = models.CharField(max_length=150, unique=True, help_text="As typed: unknown names wait alike")
    failures = models.PositiveIntegerField(default=0, help_text="Counted since the last success or pause")
    last_failure = models.DateTimeField(help_text="The platform clock at the latest failure")
    retry_after = models.DateTimeField(null=True, blank=True, help_text="No sign-in is tried before then")

    def __str__(self) -> str:
        return f"{self.username}: {self.failures} failures"


class UserSession(models.Model):
    """One signed-in browser session of a user (portal.user_sessions): written at sign-in, its last_seen
    touched at most once a minute, removed when it ends. The session's data stay in the session store;
    this row is the per-user index that lets a user see and end their sessions."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="user_sessions")
    session_key = models.CharField(max_length=40, unique=True, help_text="The session store's key; never shown")
    ip = models.CharField(max_length=45, blank=True, help_text="The client's address at sign-in")
    user_agent = models.CharField(max_length=400, blank=True, help_text="The browser's User-Agent at sign-in")
    created = models.DateTimeField(default=clock.now, help_text="When the user signed in (the platform clock)")
    last_seen = models.DateTimeField(default=clock.now, help_text="The latest request, to the minute")

    class Meta:
        ordering = ["-last_seen", "-id"]

    def __str__(self) -> str:
        return f"{self.user_id} {self.ip} {self.created:%Y-%m-%d %H:%M}"


class GroupRoleMapping(models.Model):
    """A company directory's group (OIDC `groups` claim, LDAP group, SCIM group) and what its members get: a
    role in a workspace, or staff (the console). Applied at each sign-in and SCIM change
    (portal.identity.groups); the setting IDENTITY_GROUP_ROLES adds mappings of the same shape."""

    group = models.CharField(max_length=200)
    workspace = models.ForeignKey(Workspace, null=True, blank=True, on_delete=models.CASCADE,
                                  related_name="group_mappings")
    role = models.CharField(max_length=16, choices=Role.choices, blank=True, default="")
    staff = models.BooleanField(default=False)

    class Meta:
        ordering = ["group", "workspace__slug"]
        constraints = [
            models.UniqueConstraint(fields=["group", "workspace"], name="one_mapping_per_group_and_workspace"),
            models.CheckConstraint(condition=models.Q(staff=True) | (models.Q(workspace__isnull=False) & ~models.Q(role="")),
                                   name="mapping_gives_a_role_or_staff"),
        ]

    def __str__(self) -> str:
        given = [f"{self.role} of {self.workspace.slug}"] if self.workspace_id else []
        return f"{self.group} -> {', '.join(given + (['staff'] if self.staff else []))}"


class GroupStaff(models.Model):
    """The user is staff because a company sign-in's groups said so (removed, with staff, when they stop)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="group_staff")
    source = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "source"], name="one_group_staff_per_source")]
class Invitation(models.Model):
    """An owner's invitation of an e-mail address into a workspace with a role (portal.invitations). Only
    the hash of its link's token is stored; it is used once, and refused after `expires` or once revoked.
    Resending it makes a new token (the old link stops working) and a new expiry."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(help_text="Who is invited; matched without regard to case")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's token; never the token")
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created = models.DateTimeField(default=clock.now, editable=False)
    sent = models.DateTimeField(default=clock.now, help_text="The latest e-mail (the first, or a resend)")
    expires = models.DateTimeField(help_text="The link is refused from then on (the platform clock)")
    accepted = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["workspace", "accepted", "revoked"])]

    def __str__(self) -> str:
        return f"{self.email} to {self.workspace_id} ({self.role})"

    def is_pending(self, now) -> bool:
        return self.accepted is None and self.revoked is None and self.expires > now


class DeviceAuthorization(models.Model):
    """One OAuth 2.0 device authorization (RFC 8628) of `gpuctl login` (portal.device_login): the CLI holds
    the device code (only its hash is stored), the person types the user code at /device/ and approves or
    denies; an approved one is exchanged once for an API token of the approving user."""

    class State(models.TextChoices):
        PENDING = "pending", _("Waiting for approval")
        APPROVED = "approved", _("Approved")
        DENIED = "denied", _("Denied")
        EXCHANGED = "exchanged", _("Token issued")

    device_digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the device code")
    user_code = models.CharField(max_length=8, db_index=True, help_text="As typed, without the dash")
    client = models.CharField(max_length=40, default="gpuctl")
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.SUBMIT)
    created = models.DateTimeField(default=clock.now, editable=False)
    expires = models.DateTimeField()
    interval = models.PositiveSmallIntegerField(default=5, help_text="Seconds the client waits between polls")
    last_poll = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+", help_text="Who approved or denied it")
    decided = models.DateTimeField(null=True, blank=True)
    token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.client} {self.user_code[:4]}-{self.user_code[4:]} ({self.state})"


class SshKey(models.Model):
    """A user's SSH public key for the gateway (portal.ssh_keys): ed25519, or RSA of at least 3,072 bits.
    A fingerprint names one user only, so the gateway knows who connects from the key alone."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField(help_text="One OpenSSH line: type, base64, no comment")
    fingerprint = models.CharField(max_length=64, unique=True, help_text="SHA256:<base64>, as ssh-keygen -l shows it")
    created = models.DateTimeField(default=clock.now, editable=False)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True, help_text="Refused from then on (by its user or staff)")
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @property
    def key_type(self) -> str:
        return self.public_key.split(" ", 1)[0]


class SshSession(models.Model):
    """One SSH connection through the gateway to one replica: who, where, when, how many bytes. `bytes_in` is
    what the user sent, `bytes_out` what the replica answered; `last_activity` the last byte either way."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="ssh_sessions")
    key = models.ForeignKey(SshKey, null=True, on_delete=models.SET_NULL, related_name="sessions")
    job = models.ForeignKey("scheduling.Job", on_delete=models.CASCADE, related_name="ssh_sessions")
    replica = models.CharField(max_length=80, help_text="role-index of the replica")
    source = models.CharField(max_length=45, blank=True, help_text="The client's address")
    started = models.DateTimeField(default=clock.now, db_index=True)
    ended = models.DateTimeField(null=True, blank=True, db_index=True)
    last_activity = models.DateTimeField(default=clock.now)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-started", "-id"]

    def __str__(self) -> str:
        return f"{self.user_id} -> {self.job_id}/{self.replica} {self.started:%Y-%m-%d %H:%M}"


class SshAuthFailure(models.Model):
    """A refused SSH attempt at the gateway: the audit trail, and what its rate limit counts (per source
    address and per key fingerprint, over a window)."""

    when = models.DateTimeField(default=clock.now, db_index=True)
    source = models.CharField(max_length=45, db_index=True)
    fingerprint = models.CharField(max_length=64, blank=True, db_index=True)
    username = models.CharField(max_length=200, blank=True, help_text="The name the client asked for, cut short")
    reason = models.CharField(max_length=64)

    class Meta:
        ordering = ["-when", "-id"]
