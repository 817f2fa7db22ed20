"""What SCIM changes, besides the account's own fields: who opens SCIM (its tokens), what deactivating an
account ends, and the roles its groups give. Every change is audited under the token's name."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext

from billing.models import hash_token
from portal import user_sessions
from portal.console import audit
from portal.console.services import ConsoleError
from portal.identity.groups import apply_group_roles
from portal.models import ApiToken
from portal.scim.models import ScimGroup, ScimToken
from scheduling.api import clock, kinds, stop_workload
from scheduling.models import UNSCHEDULED_STATES, Job

SOURCE = "scim"  # the source apply_group_roles marks SCIM's memberships with
LAST_USED_EVERY_S = 60


@dataclass(frozen=True)
class ScimActor:
    """Who the audit log names for a SCIM call: the token, by name (no person made the change)."""

    token: ScimToken

    pk = None

    @property
    def username(self) -> str:
        return f"scim:{self.token.name}"[:150]


# --------------------------------------------------------------------------- tokens


@transaction.atomic
def create_token(actor, name: str) -> tuple[ScimToken, str]:
    """A new SCIM token and its raw value, which is never stored and shown only once."""
    name = (name or "").strip()
    if not name:
        raise ConsoleError({"name": [gettext("a token needs a name")]})
    if "\x00" in name or len(name) > 100:
        raise ConsoleError({"name": [gettext("at most 100 characters, no NUL")]})
    raw = ScimToken.new_raw_value()
    token = ScimToken.objects.create(name=name, digest=hash_token(raw), hint=raw[:12], created_by=actor)
    audit.record(actor, "create", token, message=f"SCIM token {token.name} ({token.hint}…) created")
    return token, raw


@transaction.atomic
def revoke_token(actor, token: ScimToken) -> ScimToken:
    token = ScimToken.objects.select_for_update().get(pk=token.pk)
    if token.revoked is None:
        token.revoked = clock.now()
        token.save(update_fields=["revoked"])
        audit.record(actor, "revoke", token, message=f"SCIM token {token.name} ({token.hint}…) revoked")
    return token


def token_for(raw: str) -> ScimToken | None:
    """The live SCIM token with this raw value, else None (an API token's value never matches one)."""
    if not raw or not raw.startswith(ScimToken.PREFIX):
        return None
    token = ScimToken.objects.filter(digest=hash_token(raw), revoked__isnull=True).first()
    if token is not None:
        now = clock.now()
        if token.last_used is None or (now - token.last_used).total_seconds() >= LAST_USED_EVERY_S:
            ScimToken.objects.filter(pk=token.pk).update(last_used=now)
    return token


# --------------------------------------------------------------------------- accounts


@dataclass(frozen=True)
class Deactivated:
    sessions: int = 0
    tokens: int = 0
    notebooks: int = 0


def deactivate(actor: ScimActor, user) -> Deactivated:
    """The account can no longer sign in; at once its sessions end, its API tokens are revoked and its
    notebooks stop. Its other jobs run on, its charges stay."""
    user.is_active = False
    user.save(update_fields=["is_active"])
    sessions = user_sessions.end_all(user)
    tokens = ApiToken.objects.filter(user=user, revoked__isnull=True).update(revoked=clock.now())
    notebooks = 0
    for job in Job.objects.filter(submitted_by=user, kind__in=kinds.personal()).exclude(state__in=UNSCHEDULED_STATES):
        stop_workload(None, job, reason="its owner's account was deactivated")
        notebooks += 1
    done = Deactivated(sessions=sessions, tokens=tokens, notebooks=notebooks)
    audit.record(actor, "deactivate", user, changes={"is_active": [True, False]},
                 message=f"deactivated by SCIM: {sessions} session(s) ended, {tokens} API token(s) revoked, "
                         f"{notebooks} notebook(s) stopped")
    return done


def reactivate(actor: ScimActor, user) -> None:
    """The account may sign in again; its revoked tokens stay revoked."""
    user.is_active = True
    user.save(update_fields=["is_active"])
    audit.record(actor, "reactivate", user, changes={"is_active": [False, True]}, message="reactivated by SCIM")


def apply_roles(users) -> None:
    """Each user's roles from the SCIM groups they are in now (the mapping decides; audited there)."""
    for user in users:
        names = list(ScimGroup.objects.filter(members=user).values_list("name", flat=True))
        apply_group_roles(user, names, source=SOURCE)
