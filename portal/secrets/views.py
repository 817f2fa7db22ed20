"""The Secrets page of a workspace: its secrets and registry credentials by name, who changed each and when.
Owners add, replace and delete them; members (who name them in specs), viewers and finance see the list.
A value is never shown, not even back in a form that had an error. Outsiders get a 404."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from portal.secrets import services
from portal.selectors import get_workspace_for_user, membership_for
from scheduling.api import DomainError, secrets


class BlankTextarea(forms.Textarea):
    """A textarea that never writes its value back into the page."""

    def format_value(self, value):
        return None


class SecretForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=63,
                           widget=forms.TextInput(attrs={"id": "f-secret-name", "autocomplete": "off"}),
                           help_text=_("Lowercase letters, digits and '-', e.g. hf-token; a name in use gets the "
                                       "new value"))
    value = forms.CharField(label=_("Value"), strip=False, required=False,
                            widget=BlankTextarea(attrs={"id": "f-secret-value", "rows": 3, "autocomplete": "off",
                                                        "spellcheck": "false"}),
                            help_text=_("At most 64 KiB; stored encrypted and never shown again"))


class RegistryForm(forms.Form):
    server = forms.CharField(label=_("Registry"), max_length=253,
                             widget=forms.TextInput(attrs={"id": "f-registry-server", "autocomplete": "off"}),
                             help_text=_("Its host, e.g. registry.example.com or docker.io"))
    username = forms.CharField(label=_("Username"), max_length=secrets.MAX_USERNAME,
                               widget=forms.TextInput(attrs={"id": "f-registry-username", "autocomplete": "off"}))
    password = forms.CharField(label=_("Password or token"), strip=False, required=False,
                               widget=forms.PasswordInput(attrs={"id": "f-registry-password",
                                                                 "autocomplete": "new-password"}))


def _into(form: forms.Form, error: DomainError) -> None:
    for field, msgs in error.errors.items():
        for message in msgs:
            form.add_error(field if field in form.fields else None, message)


@login_required
@require_http_methods(["GET", "POST"])
def secrets_page(request, slug):
    workspace = get_workspace_for_user(request.user, slug)
    membership = membership_for(request.user, workspace)
    secret_form, registry_form, status = SecretForm(), RegistryForm(), 200
    if request.method == "POST":
        secrets.require_owner(request.user, workspace)  # a 403 for members, viewers and finance
        action = request.POST.get("action", "")
        try:
            if action == "set-secret":
                secret_form = SecretForm(request.POST)
                if secret_form.is_valid():
                    data = secret_form.cleaned_data
                    row, created = services.set_secret(request.user, workspace, data["name"], data["value"])
                    said = (gettext("Secret %(name)s added.") if created
                            else gettext("Secret %(name)s: its value was replaced."))
                    messages.success(request, said % {"name": row.name})
                    return redirect("workspace-secrets", slug=slug)
            elif action == "set-registry":
                registry_form = RegistryForm(request.POST)
                if registry_form.is_valid():
                    data = registry_form.cleaned_data
                    row, created = services.set_registry(request.user, workspace, data["server"], data["username"],
                                                         data["password"])
                    said = (gettext("Credential for %(server)s added.") if created
                            else gettext("Credential for %(server)s replaced."))
                    messages.success(request, said % {"server": row.server})
                    return redirect("workspace-secrets", slug=slug)
            elif action == "delete-secret":
                services.delete_secret(request.user, workspace, request.POST.get("name", ""))
                messages.success(request, gettext("Secret %(name)s deleted.") % {"name": request.POST["name"]})
                return redirect("workspace-secrets", slug=slug)
            elif action == "delete-registry":
                services.delete_registry(request.user, workspace, request.POST.get("server", ""))
                messages.success(request, gettext("Credential for %(server)s deleted.") % {
                    "server": request.POST["server"]})
                return redirect("workspace-secrets", slug=slug)
            else:
                raise DomainError({"action": gettext("unknown action %(action)s") % {"action": repr(action)}})
        except DomainError as error:
            if error.status != 400:
                raise
            _into(registry_form if action == "set-registry" else secret_form, error)
        status = 400
    return render(request, "portal/secrets.html", {
        "workspace": workspace, "membership": membership,
        "is_owner": bool(membership and membership.can_manage_secrets),
        "secrets": secrets.secrets_of(workspace).select_related("changed_by"),
        "registries": secrets.registries_of(workspace).select_related("changed_by"),
        "secret_form": secret_form, "registry_form": registry_form,
    }, status=status)
