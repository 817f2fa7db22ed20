"""Invitations (portal.models.Invitation): a workspace's owner invites an e-mail address with a role, from
the Members page or the API; the e-mail carries a link with a random token (only its hash is stored) that
works once and for INVITATION_DAYS. Owners list, resend (a new token and expiry) and revoke pending ones.

Whoever follows the link joins as the invited role: an account with that e-mail by signing in as it (the
`user_logged_in` receiver below adds every pending invitation of the signed-in account's e-mail), anyone
else by making a local account on the accept page, or, with settings.LOCAL_LOGIN off, by signing in with
the company sign-in under that verified e-mail. Every write is one audit line (source tenant), never the
token."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.translation import gettext

from billing.models import hash_token
from portal.console import audit
from portal.console.models import AuditEntry
from portal.console.user_services import new_user_errors
from portal.models import Invitation, Membership, Role, ServiceAccount, Workspace
from scheduling.api import DomainError, Forbidden, clock

log = logging.getLogger(__name__)
TENANT = AuditEntry.Source.TENANT
INVITATION_DAYS = 7


class NotOwner(Forbidden, PermissionDenied):
    """Only an owner of the workspace invites people."""

    field = "workspace"


class NoSuchInvitation(DomainError):
    status = 404
    title = "Not found"
    field = "id"


class Unusable(Exception):
    """A link that cannot be accepted (unknown, expired, used, revoked): `reason` says which."""

    def __init__(self, reason: str, invitation: Invitation | None = None):
        super().__init__(reason)
        self.reason, self.invitation = reason, invitation


def require_owner(user, workspace: Workspace) -> None:
    membership = Membership.objects.filter(user=user, workspace=workspace).first()
    if membership is None or not membership.can_manage_members:
        raise NotOwner(gettext("only an owner of %(workspace)s invites people") % {"workspace": workspace.slug})


# --------------------------------------------------------------------------- reads


def pending_of(workspace: Workspace) -> QuerySet[Invitation]:
    return (workspace.invitations.filter(accepted__isnull=True, revoked__isnull=True, expires__gt=clock.now())
            .select_related("invited_by").order_by("email", "-id"))


def get_pending(workspace: Workspace, invitation_id) -> Invitation:
    """A pending invitation of this workspace (already checked to be the caller's), else 404."""
    try:
        return pending_of(workspace).get(pk=int(invitation_id))
    except (Invitation.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NoSuchInvitation(gettext("workspace %(workspace)s has no pending invitation %(id)s") % {
            "workspace": workspace.slug, "id": repr(str(invitation_id)[:20])}) from None


def by_token(raw: str) -> Invitation:
    """The invitation of a link's token, if it can still be accepted; else Unusable saying why."""
    invitation = (Invitation.objects.select_related("workspace", "accepted_by")
                  .filter(digest=hash_token(str(raw))).first()) if raw else None
    if invitation is None:
        raise Unusable("unknown")
    if invitation.revoked is not None:
        raise Unusable("revoked", invitation)
    if invitation.accepted is not None:
        raise Unusable("used", invitation)
    if invitation.expires <= clock.now():
        raise Unusable("expired", invitation)
    return invitation


def account_for(email: str):
    """The active account of this e-mail (one only: an address two accounts share matches none)."""
    accounts = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    return accounts[0] if len(accounts) == 1 else None


# --------------------------------------------------------------------------- writes


def _link(base_url: str, raw: str) -> str:
    return (settings.PORTAL_URL or base_url).rstrip("/") + reverse("invitation-accept", args=[raw])


def _send(invitation: Invitation, raw: str, base_url: str) -> None:
    workspace = invitation.workspace
    subject = gettext("You are invited to %(workspace)s on the GPU platform") % {"workspace": workspace.name}
    inviter = invitation.invited_by.username if invitation.invited_by else gettext("an owner")
    body = gettext("%(inviter)s invites you to the workspace %(workspace)s (%(slug)s) as %(role)s.\n\n"
                   "Accept the invitation within %(days)s days, once, at:\n%(link)s\n\n"
                   "If you did not expect this e-mail, ignore it.\n") % {
        "inviter": inviter, "workspace": workspace.name, "slug": workspace.slug,
        "role": invitation.get_role_display().lower(), "days": INVITATION_DAYS, "link": _link(base_url, raw)}
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [invitation.email])
    except Exception:  # the mail server away: the invitation stands, the owner resends it
        log.exception("invitation e-mail to workspace %s could not be sent", workspace.slug)


def _new_token(invitation: Invitation) -> str:
    raw = secrets.token_urlsafe(32)
    now = clock.now()
    invitation.digest, invitation.sent, invitation.expires = hash_token(raw), now, now + timedelta(days=INVITATION_DAYS)
    return raw


def _check(workspace: Workspace, email: object, role: object) -> tuple[str, str]:
    errors: dict[str, list[str]] = {}
    email = email.strip() if isinstance(email, str) else ""
    try:
        validate_email(email)
    except ValidationError:
        errors["email"] = [gettext("%(email)s is not an e-mail address") % {"email": repr(email[:80])}]
    if role not in Role.values:
        errors["role"] = [gettext("%(role)s is not a role: one of %(roles)s") % {
            "role": repr(str(role)[:20]), "roles": ", ".join(Role.values)}]
    if errors:
        raise DomainError(errors)
    member = (workspace.memberships.filter(user__email__iexact=email).select_related("user").first())
    if member is not None:
        raise DomainError({"email": gettext("%(email)s is already a member of %(workspace)s (%(user)s, %(role)s): "
                                            "change their role in the list") % {
            "email": email, "workspace": workspace.slug, "user": member.user.username,
            "role": member.get_role_display().lower()}})
    if pending_of(workspace).filter(email__iexact=email).exists():
        raise DomainError({"email": gettext("%(email)s is already invited to %(workspace)s: resend or revoke that "
                                            "invitation") % {"email": email, "workspace": workspace.slug}})
    return email, role


@transaction.atomic
def invite(owner, workspace: Workspace, email: object, role: object, *, base_url: str) -> Invitation:
    """Invite `email` with `role` and e-mail the link; a member's or an already invited address is refused."""
    require_owner(owner, workspace)
    Workspace.objects.select_for_update().get(pk=workspace.pk)  # one pending invitation per address
    email, role = _check(workspace, email, role)
    invitation = Invitation(workspace=workspace, email=email, role=role, invited_by=owner)
    raw = _new_token(invitation)
    invitation.save()
    audit.record(owner, "invite", invitation, source=TENANT, target_repr=f"{email} to {workspace.slug}",
                 changes={"email": [None, email], "role": [None, role], "expires": [None, invitation.expires]})
    transaction.on_commit(lambda: _send(invitation, raw, base_url))
    return invitation


@transaction.atomic
def resend(owner, workspace: Workspace, invitation_id, *, base_url: str) -> Invitation:
    """A new link (the old one stops working) valid INVITATION_DAYS from now, e-mailed again."""
    require_owner(owner, workspace)
    invitation = get_pending(workspace, invitation_id)
    raw = _new_token(invitation)
    invitation.save(update_fields=["digest", "sent", "expires"])
    audit.record(owner, "resend invitation", invitation, source=TENANT,
                 target_repr=f"{invitation.email} to {workspace.slug}", changes={"expires": [None, invitation.expires]})
    transaction.on_commit(lambda: _send(invitation, raw, base_url))
    return invitation


@transaction.atomic
def revoke(owner, workspace: Workspace, invitation_id) -> None:
    require_owner(owner, workspace)
    invitation = get_pending(workspace, invitation_id)
    invitation.revoked = clock.now()
    invitation.save(update_fields=["revoked"])
    audit.record(owner, "revoke invitation", invitation, source=TENANT,
                 target_repr=f"{invitation.email} to {workspace.slug}")


def _join(invitation: Invitation, user) -> Membership:
    """Mark the invitation used by `user` and give them its role (someone already a member keeps theirs)."""
    invitation.accepted, invitation.accepted_by = clock.now(), user
    invitation.save(update_fields=["accepted", "accepted_by"])
    membership = Membership.objects.filter(user=user, workspace=invitation.workspace).first()
    if membership is None:
        membership = Membership.objects.create(user=user, workspace=invitation.workspace, role=invitation.role)
    audit.record(user, "accept invitation", invitation, source=TENANT,
                 target_repr=f"{invitation.email} to {invitation.workspace.slug}",
                 changes={"member": [None, user.username], "role": [None, membership.role]})
    return membership


@transaction.atomic
def accept_with_new_account(raw: str, username: object, password: object):
    """Make a local account named `username` with the invited e-mail and `password` (the site's password
    validators), and join. Refused while LOCAL_LOGIN is off, or when the e-mail already has an account
    (that person signs in instead)."""
    invitation = by_token(raw)
    Invitation.objects.select_for_update().get(pk=invitation.pk)  # used once, even by two clicks at once
    invitation = by_token(raw)
    if not settings.LOCAL_LOGIN:
        raise DomainError({"": [gettext("accounts are made by the company sign-in here: sign in with it")]})
    if account_for(invitation.email) is not None:
        raise DomainError({"": [gettext("%(email)s has an account: sign in to accept") % {"email": invitation.email}]})
    username, password = (username if isinstance(username, str) else ""), (password if isinstance(password, str) else "")
    errors = new_user_errors(username=username, email=invitation.email, password=password)
    if username.strip().startswith(ServiceAccount.USERNAME_PREFIX):
        errors.setdefault("username", []).append(gettext("a username may not start with %(prefix)s") % {
            "prefix": ServiceAccount.USERNAME_PREFIX})
    if errors:
        raise DomainError(errors)
    user = get_user_model()(username=username.strip(), email=invitation.email)
    user.set_password(password)
    try:
        user.full_clean(exclude=["password"])  # the username's characters and length
    except ValidationError as error:
        raise DomainError({field: list(msgs) for field, msgs in error.message_dict.items()}) from None
    user.save()
    _mark_verified(user)
    audit.record(user, "create", user, source=TENANT, message="account made on accepting an invitation",
                 changes={"username": [None, user.username], "email": [None, user.email]})
    _join(invitation, user)
    return user


def _mark_verified(user) -> None:
    """The invitation's link reached the address: allauth records it as the account's verified, primary one."""
    if apps.is_installed("allauth.account"):
        from allauth.account.models import EmailAddress

        EmailAddress.objects.update_or_create(user=user, email=user.email.lower(),
                                              defaults={"verified": True, "primary": True})


def record_trusted_address(user) -> None:
    """Before allauth's e-mail page reads the account: an address with no record (set by the operators or
    an invitation) is recorded as the verified one it is taken for. allauth would record it unverified, and
    then treat it as the unconfirmed change to replace."""
    if user.email and apps.is_installed("allauth.account"):
        from allauth.account.models import EmailAddress

        if not EmailAddress.objects.filter(user=user, email__iexact=user.email).exists():
            EmailAddress.objects.create(user=user, email=user.email.lower(), verified=True,
                                        primary=not EmailAddress.objects.filter(user=user, primary=True).exists())


def verified_email(user) -> str:
    """The account's e-mail if it is proven: where allauth keeps a record of the address, that record must
    say verified; an address with no such record was set by the operators or by an accepted invitation
    (users do not edit it on the portal's pages)."""
    email = user.email or ""
    if email and apps.is_installed("allauth.account"):
        from allauth.account.models import EmailAddress

        known = list(EmailAddress.objects.filter(user=user, email__iexact=email).values_list("verified", flat=True))
        if known and not any(known):
            return ""
    return email


def accept_pending_for(user) -> list[Membership]:
    """Every pending invitation of the account's verified e-mail accepted: its memberships."""
    email = verified_email(user)
    if not email or ServiceAccount.objects.filter(user=user).exists():
        return []
    joined = []
    with transaction.atomic():
        for invitation in (Invitation.objects.select_for_update().select_related("workspace")
                           .filter(email__iexact=email, accepted__isnull=True, revoked__isnull=True,
                                   expires__gt=clock.now()).order_by("id")):
            joined.append(_join(invitation, user))
    return joined


def on_logged_in(sender, request, user, **kwargs) -> None:
    """`user_logged_in`: the account joins the workspaces its e-mail is invited to."""
    accept_pending_for(user)

