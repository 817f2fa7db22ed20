"""The tenant job list's GET parameters: the console's JobFilterForm (every value bounded and checked, a
bad one a 400 beside its field), offering one workspace's values only."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.console.job_forms import JobFilterForm
from portal.job_lists import workspace_filter_choices
from portal.widgets import PlainSelect


class WorkspaceJobFilterForm(JobFilterForm):
    """One of the caller's workspaces: its queues and submitters; no node filter (nodes are
    the operators' business). The workspace itself is checked by the view first (404 for another's)."""

    submitter = forms.ChoiceField(label=_("Submitter"), required=False, choices=(), widget=PlainSelect,
                                  error_messages={"invalid_choice": _("%(value)s has submitted no job here")})

    field_order = ["q", "workspace", "state", "queue", "submitter", "sharing", "pool", "gpu_model", "min_age",
                   "max_age", "page_size"]

    def __init__(self, data, *, workspace, workspaces):
        self.workspace = workspace
        super().__init__(data)
        del self.fields["node"]
        self.fields["q"].help_text = _("Job name or number, or submitter")
        self.fields["workspace"].choices = [(w.slug, w.name) for w in workspaces]
        self.fields["workspace"].error_messages["invalid_choice"] = _("%(value)s is not a workspace of yours")

    def choices(self) -> dict[str, list[str]]:
        return workspace_filter_choices(self.workspace)

    def clean_submitter(self) -> str:
        return self.cleaned_data["submitter"]  # a choice already: nobody outside the workspace is looked up
