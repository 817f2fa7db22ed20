"""A workspace's service accounts (portal.models.ServiceAccount) and their tokens: owners make, list and
delete them, and mint and revoke their tokens, from the workspace page or the API. Each write is one audit
line (source tenant) naming the account or token, never a token's value.

An account acts through its own user and membership, so everything the API checks for a person (the
workspace is the caller's, the role allows the action, the token's scope) holds for it unchanged."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext

from portal import services
from portal.console import audit
from portal.console.models import AuditEntry
from portal.models import ApiToken, Membership, ServiceAccount, TokenScope, Workspace
from scheduling.api import DomainError, Forbidden, clock

TENANT = AuditEntry.Source.TENANT
TOKEN_TYPE = "portal.apitoken"
NAME_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")


class NotOwner(Forbidden, PermissionDenied):
    """Only an owner of the workspace manages its service accounts."""

    field = "workspace"


class NoSuchServiceAccount(DomainError):
    status = 404
    title = "Not found"
    field = "name"


def is_service_account(user) -> bool:
    return bool(getattr(user, "pk", None)) and ServiceAccount.objects.filter(user=user).exists()


def require_owner(user, workspace: Workspace) -> None:
    membership = Membership.objects.filter(user=user, workspace=workspace).first()
    if membership is None or not membership.can_manage_members:
        raise NotOwner(gettext("only an owner of %(workspace)s manages its service accounts") % {
            "workspace": workspace.slug})


# --------------------------------------------------------------------------- reads


def service_accounts_of(workspace: Workspace) -> QuerySet[ServiceAccount]:
    """The workspace's accounts (not deleted), each with its user and maker."""
    return (ServiceAccount.objects.filter(workspace=workspace, deleted__isnull=True)
            .select_related("user", "created_by", "workspace").order_by("name"))


def role_of(account: ServiceAccount) -> str:
    return Membership.objects.filter(user=account.user_id, workspace=account.workspace_id).values_list(
        "role", flat=True).first() or ""


def roles_of(accounts) -> dict[int, str]:
    """The role of each account, by its user's id, in one query."""
    rows = Membership.objects.filter(user__in=[a.user_id for a in accounts]).values_list("user_id", "role")
    return dict(rows)


def get_service_account(workspace: Workspace, name: str) -> ServiceAccount:
    account = service_accounts_of(workspace).filter(name=name).first()
    if account is None:
        raise NoSuchServiceAccount(gettext("workspace %(workspace)s has no service account %(name)s") % {
            "workspace": workspace.slug, "name": repr(str(name)[:60])})
    return account


def tokens_of(account: ServiceAccount) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=account.user_id).order_by("-created", "-id")


# --------------------------------------------------------------------------- writes


def _check(name: object, role: object) -> tuple[str, str]:
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        errors["name"] = [gettext("a service account's name is lowercase letters, digits and '-', at most 40, "
                                  "starting and ending with a letter or digit, e.g. ci-pipeline")]
    if role not in ServiceAccount.ROLES:
        errors["role"] = [gettext("%(role)s is not a role for a service account: one of %(roles)s") % {
            "role": repr(str(role)[:20]), "roles": ", ".join(ServiceAccount.ROLES)}]
    if errors:
        raise DomainError(errors)
    return name, role


@transaction.atomic
def create_service_account(owner, workspace: Workspace, name: object, role: object) -> ServiceAccount:
    """A new account named `name` with `role` (member or viewer). A name in use is refused; the name of a
    deleted one is made again, with none of its old tokens (they stay revoked)."""
    require_owner(owner, workspace)
    name, role = _check(name, role)
    Workspace.objects.select_for_update().get(pk=workspace.pk)  # one account of a name at a time
    account = ServiceAccount.objects.filter(workspace=workspace, name=name).select_related("user").first()
    if account is not None and account.deleted is None:
        raise DomainError({"name": gettext("%(workspace)s already has a service account %(name)s") % {
            "workspace": workspace.slug, "name": repr(name)}})
    username = ServiceAccount.username_for(workspace.slug, name)
    if account is None:
        users = get_user_model().objects
        if users.filter(username=username).exists():  # not one of ours: never take over an account
            raise DomainError({"name": gettext("the name %(name)s is taken: choose another") % {"name": repr(name)}})
        user = users.create(username=username, is_active=True)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        account = ServiceAccount.objects.create(workspace=workspace, name=name, user=user, created_by=owner)
    else:
        account.user.is_active = True
        account.user.save(update_fields=["is_active"])
        account.created_by, account.created, account.deleted = owner, clock.now(), None
        account.save(update_fields=["created_by", "created", "deleted"])
    Membership.objects.create(user=account.user, workspace=workspace, role=role)
    audit.record(owner, "create", account, changes={"role": [None, role]}, source=TENANT)
    return account


@transaction.atomic
def delete_service_account(owner, workspace: Workspace, name: str) -> None:
    """Revoke every token of the account, take its membership away and deactivate its user; jobs it
    submitted keep it as their submitter."""
    require_owner(owner, workspace)
    account = get_service_account(workspace, name)
    now = clock.now()
    revoked = tokens_of(account).filter(revoked__isnull=True).update(revoked=now)
    role = role_of(account)
    Membership.objects.filter(user=account.user_id).delete()
    type(account.user).objects.filter(pk=account.user_id).update(is_active=False)
    account.deleted = now
    account.save(update_fields=["deleted"])
    audit.record(owner, "delete", account, changes={"role": [role, None], "tokens revoked": [None, revoked]},
                 source=TENANT)


@transaction.atomic
def create_token(owner, workspace: Workspace, name: str, token_name: str, *, scope: str = TokenScope.SUBMIT,
                 days: int | str = services.DEFAULT_TOKEN_DAYS) -> tuple[ApiToken, str]:
    """A token of the account (name, scope and lifetime checked as for a personal one); the raw value is
    returned once and never stored or audited."""
    require_owner(owner, workspace)
    account = get_service_account(workspace, name)
    token, raw = services.create_api_token(account.user, token_name, scope=scope, days=days)
    audit.record(owner, "create", target_type_name=TOKEN_TYPE, target_id=str(token.pk),
                 target_repr=f"{account}/{token.name}", changes={
                     "scope": [None, token.scope], "expires": [None, token.expires], "hint": [None, token.hint]},
                 source=TENANT)
    return token, raw


@transaction.atomic
def revoke_token(owner, workspace: Workspace, name: str, token_id: object) -> ApiToken:
    """Revoke one of the account's tokens (refused from now on); another account's or a person's is a 404."""
    require_owner(owner, workspace)
    account = get_service_account(workspace, name)
    try:
        token = tokens_of(account).select_for_update().get(pk=int(token_id))
    except (ApiToken.DoesNotExist, TypeError, ValueError, OverflowError):
        raise NoSuchServiceAccount({"token": gettext("%(account)s has no token %(token)s") % {
            "account": str(account), "token": repr(str(token_id)[:20])}}) from None
    if token.revoked is None:
        token.revoked = clock.now()
        token.save(update_fields=["revoked"])
        audit.record(owner, "revoke", target_type_name=TOKEN_TYPE, target_id=str(token.pk),
                     target_repr=f"{account}/{token.name}", changes={"revoked": [None, token.revoked]},
                     source=TENANT)
    return token
