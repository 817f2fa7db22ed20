"""The console's users page (staff only): list accounts, create one, deactivate or reactivate it, reset its
password, end its sessions, anonymise a departed person. Thin views over portal.console.user_services; deactivating and resetting ask for confirmation."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import password_validators_help_texts
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from portal import user_sessions
from portal.console import anonymise, user_selectors, user_services
from portal.console.services import ConsoleError
from portal.console.views import operator_required


def _password_help() -> str:
    return " ".join(password_validators_help_texts())


class UserCreateForm(forms.Form):
    username = forms.CharField(label=_("Username"), max_length=150,
                               help_text=_("What the user logs in with: letters, digits and @ . + - _"))
    email = forms.EmailField(label=_("E-mail"), required=False, help_text=_("Where budget and idle-GPU notices go"))
    password = forms.CharField(label=_("Initial password"), strip=False, widget=forms.PasswordInput(render_value=False))
    is_staff = forms.BooleanField(label=_("Operator (staff)"), required=False,
                                  help_text=_("May use this console. Leave off for tenants."))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["password"].help_text = gettext("Give it to the user; they can change it. %(rules)s") % {
            "rules": _password_help()}
        self.fields["username"].validators.append(get_user_model().username_validator)

    def clean(self):
        data = super().clean()
        # the service's own checks (taken name, password validators), shown with the fields' other errors
        checked = {k: data.get(k) or "" for k in ("username", "email", "password")}
        for field, msgs in user_services.new_user_errors(**checked).items():
            if field not in self.errors:
                for message in msgs:
                    self.add_error(field, message)
        return data


class PasswordResetForm(forms.Form):
    password = forms.CharField(label=_("New password"), strip=False, widget=forms.PasswordInput(render_value=False))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["password"].help_text = _password_help()


def _add_errors(form: forms.Form, error: ConsoleError) -> None:
    """The service's messages beside their fields (the whole form's on top)."""
    for field, msgs in error.errors.items():
        for message in msgs:
            form.add_error(field if field in form.fields else None, message)


@operator_required
def users(request):
    form = UserCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = user_services.create_user(request.user, **form.cleaned_data)
        except ConsoleError as error:
            _add_errors(form, error)
        else:
            messages.success(request, gettext("User %(user)s created. Add them to a workspace to let them work.") % {
                "user": user.username})
            return redirect("console-users")
    return render(request, "console/users.html", {
        "section": "users", "rows": user_selectors.user_rows(), "form": form,
    }, status=400 if form.errors else 200)


@operator_required
def user_active(request, username, active: bool):
    """GET: what (de)activating does; POST: do it."""
    user = get_object_or_404(get_user_model(), username=username)
    errors: list[str] = []
    if request.method == "POST":
        try:
            user_services.set_active(request.user, user, active)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, (gettext("User %(user)s reactivated.") if active
                                       else gettext("User %(user)s deactivated.")) % {"user": user.username})
            return redirect("console-users")
    elif not active and user.pk == request.user.pk:
        errors = ["you cannot deactivate your own account"]
    return render(request, "console/user_active.html", {
        "section": "users", "account": user, "active": active, "errors": errors,
        "memberships": user.memberships.select_related("workspace").order_by("workspace__slug"),
    }, status=400 if errors else 200)


@operator_required
def user_password(request, username):
    """GET: the new-password form, which says what a reset does; POST: set it."""
    user = get_object_or_404(get_user_model(), username=username)
    form = PasswordResetForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user_services.reset_password(request.user, user, form.cleaned_data["password"])
        except ConsoleError as error:
            _add_errors(form, error)
        else:
            messages.success(request, gettext("Password of %(user)s reset. Give them the new one.") % {
                "user": user.username})
            return redirect("console-users")
    return render(request, "console/user_password.html", {"section": "users", "account": user, "form": form},
                  status=400 if form.errors else 200)


@operator_required
def user_sessions_end(request, username):
    """GET: the user's signed-in sessions and what ending them does; POST: end them all."""
    user = get_object_or_404(get_user_model(), username=username)
    if request.method == "POST":
        ended = user_services.end_sessions(request.user, user)
        messages.success(request, ngettext("%(count)s session of %(user)s ended.", "%(count)s sessions of %(user)s ended.",
                                           ended) % {"count": ended, "user": user.username})
        return redirect("console-users")
    rows = user_sessions.sessions_of(user)
    for row in rows:
        row.device = user_sessions.device(row.user_agent)
    return render(request, "console/user_sessions.html", {"section": "users", "account": user, "rows": rows})


@operator_required
def user_anonymise(request, username):
    """GET: what anonymising does (an operator's account needs one more box ticked); POST: do it."""
    user = get_object_or_404(get_user_model(), username=username)
    force = request.POST.get("force") == "1"
    errors: list[str] = []
    if request.method == "POST":
        try:
            done = anonymise.anonymise_user(request.user, user, force=force)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("The account is anonymised as %(name)s.") % {"name": done.pseudonym})
            return redirect("console-users")
    elif user.pk == request.user.pk:
        errors = [gettext("you cannot anonymise your own account")]
    return render(request, "console/user_anonymise.html", {
        "section": "users", "account": user, "errors": errors, "pseudonym": anonymise.pseudonym(user),
        "operator": user.is_staff or user.is_superuser,
    }, status=400 if errors else 200)
