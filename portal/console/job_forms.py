"""Forms of the operators' job pages: the list's filters (every value checked, a bad one is a 400
with its error beside the field) and the four actions' inputs."""

from __future__ import annotations

import re
from datetime import timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS
from django.forms.utils import ErrorDict
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.console import job_selectors
from portal.console.job_selectors import DEFAULT_PAGE_SIZE, DEFAULT_SORT, MAX_PAGE_SIZE, SORTS, JobFilters
from portal.widgets import PlainSelect
from scheduling.api import MAX_PRIORITY
from scheduling.api import formats as shown

MAX_PARAMETER_LENGTH = 200
MAX_PAGE = 1_000_000
MAX_AGE_DAYS = 3660
AGE = re.compile(r"(\d{1,6})\s*(m|h|d|w)")
AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
SORT_CHOICES = [(key, key) for name in SORTS for key in (name, f"-{name}")]
MAX_REASON_LENGTH = 500


def parse_age(text: str) -> timedelta:
    """`30m`, `6h`, `2d` or `1w`."""
    match = AGE.fullmatch(text.strip().lower())
    if not match:
        raise forms.ValidationError(gettext("write a number and a unit: 30m, 6h, 2d or 1w"))
    age = timedelta(**{AGE_UNITS[match[2]]: int(match[1])})
    if age > timedelta(days=MAX_AGE_DAYS):
        raise forms.ValidationError(gettext("at most %(days)s days") % {"days": MAX_AGE_DAYS})
    return age


def _choice(label: str, help_text: str, invalid: str) -> forms.ChoiceField:
    return forms.ChoiceField(label=label, help_text=help_text, required=False, choices=(), widget=PlainSelect,
                             error_messages={"invalid_choice": invalid})


class JobFilterForm(forms.Form):
    """The operators' job list: filters, search, sort and page, read from GET parameters."""

    q = forms.CharField(label=_("Search"), required=False, max_length=MAX_PARAMETER_LENGTH,
                        help_text=_("Job name or number, workspace or submitter"))
    workspace = _choice(_("Workspace"), "", _("%(value)s is not a workspace"))
    queue = _choice(_("Queue"), "", _("%(value)s is not a leaf queue"))
    pool = _choice(_("Pool"), _("Quoted for it, or a replica ran there"), _("%(value)s is not a node pool"))
    node = forms.CharField(label=_("Node"), required=False, max_length=253, help_text=_("A replica ran there"))
    state = _choice(_("State"), "", _("%(value)s is not a job state"))
    submitter = forms.CharField(label=_("Submitter"), required=False, max_length=150, help_text=_("User name"))
    gpu_model = _choice(_("GPU model"), "", _("%(value)s is not a GPU model of the cluster"))
    sharing = _choice(_("Sharing mode"), "", _("%(value)s is not a sharing mode"))
    min_age = forms.CharField(label=_("Older than"), required=False, max_length=12,
                              help_text=_("Submitted at least this long ago: 30m, 6h, 2d, 1w"),
                              widget=forms.TextInput(attrs={"placeholder": _("e.g. 2h")}))
    max_age = forms.CharField(label=_("Newer than"), required=False, max_length=12,
                              help_text=_("Submitted at most this long ago"),
                              widget=forms.TextInput(attrs={"placeholder": _("e.g. 1d")}))
    sort = forms.ChoiceField(label=_("Sort by"), required=False, choices=SORT_CHOICES, widget=PlainSelect,
                             error_messages={"invalid_choice": _("%(value)s is not a column to sort by")})
    page_size = forms.IntegerField(label=_("Rows a page"), required=False, min_value=1, max_value=MAX_PAGE_SIZE,
                                   help_text=format_lazy(_("At most {rows}"), rows=MAX_PAGE_SIZE),
                                   widget=forms.NumberInput(attrs={"placeholder": DEFAULT_PAGE_SIZE}))
    page = forms.IntegerField(label=_("Page"), required=False, min_value=1, max_value=MAX_PAGE)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, values in self.choices().items():
            label = shown.state_text if name == "state" else str  # a state in the reader's words, its value as is
            self.fields[name].choices = [("", _("all")), *((v, label(v)) for v in values)]

    def choices(self) -> dict[str, list[str]]:
        """The values each select offers: every workspace's here (the tenants' list offers its own)."""
        return job_selectors.filter_choices()

    def clean_node(self) -> str:
        node = self.cleaned_data["node"].strip()
        if node and not job_selectors.node_exists(node):
            raise forms.ValidationError(f"no node named {node!r}")
        return node

    def clean_submitter(self) -> str:
        name = self.cleaned_data["submitter"].strip()
        if name and not get_user_model().objects.filter(username=name).exists():
            raise forms.ValidationError(f"no user named {name!r}")
        return name

    def clean_min_age(self) -> timedelta | None:
        return parse_age(self.cleaned_data["min_age"]) if self.cleaned_data["min_age"].strip() else None

    def clean_max_age(self) -> timedelta | None:
        return parse_age(self.cleaned_data["max_age"]) if self.cleaned_data["max_age"].strip() else None

    def full_clean(self):
        # Every parameter is bounded first, those the form does not read included: nothing long is
        # looked up or echoed back in a message.
        items = self.data.lists() if hasattr(self.data, "lists") else ((k, [v]) for k, v in self.data.items())
        too_long = [key for key, values in items if any(len(str(v)) > MAX_PARAMETER_LENGTH for v in values)]
        if not self.is_bound or not too_long:
            return super().full_clean()
        self._errors, self.cleaned_data = ErrorDict(), {}
        for key in too_long:
            where = key if key in self.fields else NON_FIELD_ERRORS
            message = gettext("at most %(characters)s characters") % {"characters": MAX_PARAMETER_LENGTH}
            self._errors.setdefault(where, self.error_class()).append(
                message if where == key else f"{key[:40]}: {message}")

    def clean(self):
        data = super().clean()
        low, high = data.get("min_age"), data.get("max_age")
        if low is not None and high is not None and low > high:
            self.add_error("max_age", gettext("must be more than “Older than”: no job is both"))
        return data

    def filters(self) -> JobFilters:
        d = self.cleaned_data
        text = {name: d.get(name) or "" for name in ("workspace", "queue", "pool", "node", "state", "submitter",
                                                       "gpu_model", "sharing")}  # a form may leave some out
        return JobFilters(q=d["q"].strip(), **text, min_age=d["min_age"], max_age=d["max_age"],
                          sort=d["sort"] or DEFAULT_SORT)

    def paging(self) -> tuple[int, int]:
        """(page number, rows a page)."""
        return self.cleaned_data.get("page") or 1, self.cleaned_data.get("page_size") or DEFAULT_PAGE_SIZE


class ReasonForm(forms.Form):
    """Cancel and requeue: an optional reason, shown to the tenant on the job's events and kept in the audit log."""

    reason = forms.CharField(label=_("Reason"), required=False, max_length=MAX_REASON_LENGTH,
                             help_text=_("Optional; the job's owners see it on the job's events"))

    def clean_reason(self) -> str:
        return " ".join(self.cleaned_data["reason"].split())


class PriorityForm(ReasonForm):
    priority = forms.IntegerField(label=_("New priority"), min_value=0, max_value=MAX_PRIORITY,
                                  help_text=format_lazy(_("0 to {most}: the scheduler starts higher first and preempts "
                                                          "lower first; the job stays billed at its quoted priority"),
                                                        most=MAX_PRIORITY))

    field_order = ["priority", "reason"]

    def __init__(self, *args, job, **kwargs):
        super().__init__(*args, **kwargs)
        self.job = job

    def clean_priority(self) -> int:
        priority = self.cleaned_data["priority"]
        if priority == self.job.priority:
            raise forms.ValidationError(gettext("the job's priority is already %(priority)s") % {"priority": priority})
        return priority


class MoveForm(ReasonForm):
    queue = forms.ModelChoiceField(label=_("Move to queue"), queryset=None, to_field_name="name",
                                   help_text=_("Leaf queues open to the job's workspace"),
                                   error_messages={"invalid_choice": _("not a queue open to the job's workspace")})

    field_order = ["queue", "reason"]

    def __init__(self, *args, job, **kwargs):
        super().__init__(*args, **kwargs)
        self.job = job
        self.fields["queue"].queryset = job_selectors.move_targets(job)
