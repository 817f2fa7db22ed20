"""/invitations/<token>/: the page an invitation's link opens. It says why a link cannot be used (unknown,
expired, used, revoked); otherwise it lets the invited person join: the account with that e-mail by signing
in (or, signed in already, with one button), anyone else by making a local account here, or, with
LOCAL_LOGIN off, by signing in with the company sign-in."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from portal import invitations
from scheduling.api import DomainError

LOCAL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class NewAccountForm(forms.Form):
    username = forms.CharField(label=_("Username"), max_length=150,
                               widget=forms.TextInput(attrs={"id": "f-invite-username", "autocomplete": "username"}))
    password = forms.CharField(label=_("Password"), strip=False,
                               widget=forms.PasswordInput(attrs={"id": "f-invite-password",
                                                                 "autocomplete": "new-password"}))
    password2 = forms.CharField(label=_("Password again"), strip=False,
                                widget=forms.PasswordInput(attrs={"id": "f-invite-password2",
                                                                  "autocomplete": "new-password"}))

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password2") and data["password"] != data["password2"]:
            self.add_error("password2", gettext("the two passwords differ"))
        return data


UNUSABLE = {
    "unknown": (404, _("This invitation link is not known. Check that it is complete, or ask the workspace's "
                       "owner for a new invitation.")),
    "expired": (410, _("This invitation has expired. Ask the workspace's owner to send it again.")),
    "used": (410, _("This invitation has already been used. Sign in to reach the workspace.")),
    "revoked": (410, _("This invitation was revoked by the workspace's owner.")),
}


def _unusable(request, reason: str):
    status, text = UNUSABLE[reason]
    return render(request, "portal/invitation_unusable.html", {"reason": reason, "text": text}, status=status)


def _joined(request, workspace):
    messages.success(request, gettext("You are now a member of %(workspace)s.") % {"workspace": workspace.name})
    return redirect("workspace", slug=workspace.slug)


@require_http_methods(["GET", "POST"])
def accept(request, token):
    try:
        invitation = invitations.by_token(token)
    except invitations.Unusable as unusable:
        used = unusable.invitation
        if (unusable.reason == "used" and request.user.is_authenticated and used is not None
                and used.accepted_by_id == request.user.pk):  # back from signing in: the sign-in joined them
            return _joined(request, used.workspace)
        return _unusable(request, unusable.reason)
    context = {"invitation": invitation, "workspace": invitation.workspace, "local_login": settings.LOCAL_LOGIN,
               "login_url": reverse("login") + "?" + urlencode({"next": request.path})}
    if request.user.is_authenticated:
        if invitations.verified_email(request.user).lower() != invitation.email.lower():
            # neither the workspace nor the address is shown to another account
            return render(request, "portal/invitation_unusable.html", {"reason": "other-account", "text": gettext(
                "This invitation is for another e-mail address than your account's. Sign out, then open the link "
                "again and sign in as the invited account.")}, status=403)
        if request.method == "POST":
            with transaction.atomic():
                invitations.accept_pending_for(request.user)
            return _joined(request, invitation.workspace)
        return render(request, "portal/invitation_accept.html", {**context, "mode": "join"})
    if invitations.account_for(invitation.email) is not None:
        return render(request, "portal/invitation_accept.html", {**context, "mode": "sign-in"})
    if not settings.LOCAL_LOGIN:
        return render(request, "portal/invitation_accept.html", {**context, "mode": "company"})
    form = NewAccountForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            user = invitations.accept_with_new_account(token, form.cleaned_data["username"],
                                                       form.cleaned_data["password"])
        except invitations.Unusable as unusable:
            return _unusable(request, unusable.reason)
        except DomainError as error:
            for field, msgs in error.errors.items():
                for message in msgs:
                    form.add_error(field if field in form.fields else None, message)
        else:
            login(request, user, backend=LOCAL_BACKEND)
            return _joined(request, invitation.workspace)
    return render(request, "portal/invitation_accept.html", {**context, "mode": "new-account", "form": form},
                  status=400 if form.errors else 200)
