"""The operators' groups-to-roles page: which company directory groups give which workspace roles, or staff
(portal.identity.groups applies them at each sign-in and SCIM change)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.console import audit
from portal.console.views import operator_required
from portal.models import GroupRoleMapping, Role, Workspace


class GroupRoleForm(forms.ModelForm):
    group = forms.CharField(label=_("Group"), max_length=200,
                            help_text=_("As the directory names it, e.g. ml-vision-owners"))
    workspace = forms.ModelChoiceField(label=_("Workspace"), required=False, to_field_name="slug",
                                       queryset=Workspace.objects.order_by("slug"), empty_label=_("(none)"),
                                       error_messages={"invalid_choice": _("no such workspace")})
    role = forms.ChoiceField(label=_("Role"), required=False, choices=[("", _("(none)")), *Role.choices])
    staff = forms.BooleanField(label=_("Staff (the console)"), required=False)

    class Meta:
        model = GroupRoleMapping
        fields = ["group", "workspace", "role", "staff"]

    def clean(self):
        data = super().clean()
        if bool(data.get("workspace")) != bool(data.get("role")):
            raise forms.ValidationError(gettext("a workspace and a role go together"))
        if not data.get("workspace") and not data.get("staff"):
            raise forms.ValidationError(gettext("give a role in a workspace, staff, or both"))
        return data


@operator_required
def group_roles(request):
    form = GroupRoleForm()
    if request.method == "POST" and "delete" in request.POST:
        mapping = get_object_or_404(GroupRoleMapping, pk=request.POST["delete"])
        audit.record(request.user, "delete", mapping)
        mapping.delete()
        messages.info(request, gettext("Mapping of %(group)s deleted.") % {"group": mapping.group})
        return redirect("console-group-roles")
    if request.method == "POST":
        form = GroupRoleForm(request.POST)
        if form.is_valid():
            mapping = form.save()
            audit.record(request.user, "create", mapping, changes=audit.snapshot(mapping, ["group", "role", "staff"]))
            messages.info(request, gettext("Members of %(group)s get it at their next sign-in.") % {
                "group": mapping.group})
            return redirect("console-group-roles")
    rows = GroupRoleMapping.objects.select_related("workspace")
    return render(request, "console/group_roles.html", {"section": "identity", "form": form, "rows": rows},
                  status=400 if form.errors else 200)
