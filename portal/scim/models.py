"""SCIM provisioning (RFC 7643/7644): the tokens identity providers call /scim/v2/ with, the groups they
push, and what SCIM knows of each account it manages."""

import secrets

from django.conf import settings
from django.db import models

from scheduling.api import clock


class ScimToken(models.Model):
    """An identity provider's bearer token for /scim/v2/, made by an operator; only its hash is stored,
    the raw value is shown once. It opens SCIM and nothing else (no API, no pages)."""

    PREFIX = "scim_"

    name = models.CharField(max_length=100, help_text="Whose it is, e.g. okta-production")
    digest = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created = models.DateTimeField(default=clock.now, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def new_raw_value(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class ScimGroup(models.Model):
    """A group of the identity provider (not a workspace): its members' roles follow from the group-to-role
    mapping (portal.identity.groups), recomputed whenever a membership changes."""

    name = models.CharField(max_length=255, unique=True)
    external_id = models.CharField(max_length=255, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="scim_groups")
    created = models.DateTimeField(default=clock.now, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScimAccount(models.Model):
    """What SCIM knows of an account: the provider's externalId, and whether the provider deleted it
    (the account itself is never deleted: its jobs and charges stay; SCIM answers 404 for it)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scim_account")
    external_id = models.CharField(max_length=255, blank=True)
    deleted = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"SCIM {self.user}"
