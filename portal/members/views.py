"""The Members page of a workspace: every member sees the list; owners add members, invite people by
e-mail (and resend or revoke pending invitations), change roles and remove members (after a
confirmation). Outsiders get a 404, as for every workspace page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from portal import invitations
from portal.console.services import ConsoleError
from portal.members import selectors, services
from portal.models import Role
from portal.selectors import get_workspace_for_user
from scheduling.api import DomainError

ROLE_HELP = _("Owner: manages members, the budget and the webhook, and submits jobs. Member: submits and cancels "
              "jobs. Viewer: sees jobs and reports, and cannot act. Finance: budgets and reports.")


class AddMemberForm(forms.Form):
    username = forms.CharField(label=_("Username or e-mail"), max_length=254,
                               widget=forms.TextInput(attrs={"id": "f-member-user", "autocomplete": "off"}),
                               help_text=_("An existing account of the platform"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER, help_text=ROLE_HELP,
                             widget=forms.Select(attrs={"id": "f-member-role"}))


class InviteForm(forms.Form):
    email = forms.CharField(label=_("E-mail"), max_length=254,
                            widget=forms.EmailInput(attrs={"id": "f-invite-email", "autocomplete": "off"}),
                            help_text=_("They get a link that works once, for 7 days"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER,
                             widget=forms.Select(attrs={"id": "f-invite-role"}))


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices)


def _into(form: forms.Form, error: ConsoleError) -> None:
    for field, msgs in error.errors.items():
        for message in msgs:
            form.add_error(field if field in form.fields else None, message)


@login_required
@require_http_methods(["GET", "POST"])
def members(request, slug):
    workspace = get_workspace_for_user(request.user, slug)
    mine = selectors.membership_of(request.user, workspace)
    add_form, invite_form, role_errors = AddMemberForm(), InviteForm(), {}
    if request.method == "POST":
        services.require_owner(request.user, workspace)  # a 403 for members, viewers and finance
        if "invite" in request.POST:
            invite_form = InviteForm(request.POST)
            if invite_form.is_valid():
                try:
                    invitation = invitations.invite(request.user, workspace, invite_form.cleaned_data["email"],
                                                    invite_form.cleaned_data["role"],
                                                    base_url=request.build_absolute_uri("/"))
                except DomainError as error:
                    _into(invite_form, error)
                else:
                    messages.success(request, gettext("%(email)s invited to %(workspace)s as %(role)s.") % {
                        "email": invitation.email, "workspace": workspace.slug,
                        "role": invitation.get_role_display().lower()})
                    return redirect("workspace-members", slug=slug)
        elif "member" in request.POST:
            membership = selectors.get_member(workspace, request.POST["member"])
            form = RoleForm(request.POST)
            try:
                if not form.is_valid():
                    raise ConsoleError.of_form(form)
                changed = services.change_role(request.user, membership, form.cleaned_data["role"])
            except ConsoleError as error:
                role_errors = {membership.pk: [m for msgs in error.errors.values() for m in msgs]}
            else:
                messages.success(request, gettext("%(user)s is now %(role)s of %(workspace)s.") % {
                    "user": changed.user.username, "role": changed.get_role_display().lower(), "workspace": workspace.slug})
                return redirect("workspace-members", slug=slug)
        else:
            add_form = AddMemberForm(request.POST)
            if add_form.is_valid():
                try:
                    added = services.add_member(request.user, workspace, add_form.cleaned_data["username"],
                                                add_form.cleaned_data["role"])
                except ConsoleError as error:
                    _into(add_form, error)
                else:
                    messages.success(request, gettext("%(user)s added to %(workspace)s as %(role)s.") % {
                        "user": added.user.username, "workspace": workspace.slug,
                        "role": added.get_role_display().lower()})
                    return redirect("workspace-members", slug=slug)
    is_owner = bool(mine and mine.can_manage_members)
    return render(request, "portal/members.html", {
        "workspace": workspace, "membership": mine, "is_owner": is_owner,
        "members": selectors.members_of(workspace), "add_form": add_form, "role_errors": role_errors,
        "roles": Role.choices, "role_help": ROLE_HELP, "invite_form": invite_form,
        "invitations": invitations.pending_of(workspace) if is_owner else [],
    }, status=400 if add_form.errors or invite_form.errors or role_errors else 200)


@login_required
@require_POST
def invitation_action(request, slug, invitation_id, action):
    """Resend (a new link, seven days from now) or revoke a pending invitation; owners only."""
    workspace = get_workspace_for_user(request.user, slug)
    services.require_owner(request.user, workspace)
    try:
        if action == "resend":
            invitation = invitations.resend(request.user, workspace, invitation_id,
                                            base_url=request.build_absolute_uri("/"))
            messages.success(request, gettext("A new invitation link was sent to %(email)s.") % {
                "email": invitation.email})
        else:
            invitation = invitations.get_pending(workspace, invitation_id)
            invitations.revoke(request.user, workspace, invitation_id)
            messages.success(request, gettext("The invitation of %(email)s is revoked: its link no longer works.") % {
                "email": invitation.email})
    except invitations.NoSuchInvitation as error:
        raise Http404(str(error)) from None
    return redirect("workspace-members", slug=slug)


@login_required
@require_http_methods(["GET", "POST"])
def member_remove(request, slug, member_id):
    """GET: who loses what, or why it is refused; POST: remove the member."""
    workspace = get_workspace_for_user(request.user, slug)
    services.require_owner(request.user, workspace)
    membership = selectors.get_member(workspace, member_id)
    errors: list[str] = []
    if request.method == "POST":
        try:
            services.remove_member(request.user, membership)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("%(user)s removed from %(workspace)s.") % {
                "user": membership.user.username, "workspace": workspace.slug})
            if membership.user == request.user:  # an owner who left: the workspace is no longer theirs
                return redirect("dashboard")
            return redirect("workspace-members", slug=slug)
    return render(request, "portal/member_remove.html", {
        "workspace": workspace, "member": membership, "errors": errors,
        "last_owner": selectors.is_last_owner(membership), "is_self": membership.user == request.user,
    }, status=400 if errors else 200)
