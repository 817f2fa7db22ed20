"""The Submit page: the YAML editor and the image form, examples made for the workspace, a quote per
option for a stated duration, and submitting one. It works as a plain form (quote, then submit an
option) and `static/portal/submit.js` makes it live (editor, form <-> YAML, re-quotes as you type).

GET `?from=<job id>` starts from one of the caller's jobs (its spec and workspace: "clone and
edit"); `?example=<key>` from one of the workspace's examples."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from billing.api import (
    has_schedule,
    quote_for_workspace,
    quote_texts,
    submit_quoted_job,
    submit_quoted_schedule,
)
from portal import selectors as portal_selectors
from portal.selectors import current_workspace
from portal.submit_page import (
    DEFAULT_HOURS,
    clone_source,
    common_tradeoffs,
    examples_for,
    hours_of,
    kind_tabs,
    page_words,
    quote_rows,
    submit_texts,
)
from scheduling import kinds
from scheduling.api import DEFAULT_NOTEBOOK_IMAGE, MAX_BYTES, DomainError, secrets
from scheduling.api import selectors as scheduling_selectors


class SubmitForm(forms.Form):
    workspace = forms.SlugField(max_length=64)
    spec = forms.CharField(max_length=MAX_BYTES, strip=False, error_messages={"required": _("the spec is empty")})
    duration_hours = forms.DecimalField(
        min_value=Decimal("0.01"), max_value=Decimal("2160"), max_digits=6, decimal_places=2, required=False,
        error_messages={"invalid": _("enter the duration in hours, e.g. 2 or 0.5")})
    option = forms.CharField(max_length=200, required=False)

    def clean_spec(self):
        # a browser posts a textarea's lines ending in CRLF; the spec is stored as typed
        return self.cleaned_data["spec"].replace("\r\n", "\n")


def _context(request, workspace, **extra):
    membership = portal_selectors.my_membership(request, workspace)
    examples = examples_for(workspace) if workspace else []
    return {
        "workspace": workspace, "may_submit": bool(membership and membership.can_submit),
        "queues": scheduling_selectors.queues_for_workspace(workspace) if workspace else [],
        "pools": [p.name for p in scheduling_selectors.cluster_info().pools],
        "examples": examples, "example_texts": {key: text for key, _, text in examples},
        "spec_text": "", "duration_hours": DEFAULT_HOURS, "errors": [], "quote": None, "rows": [], "common": [],
        "kind": kinds.DEFAULT, "notebook_image": DEFAULT_NOTEBOOK_IMAGE, "submit_texts": submit_texts(),
        "kind_tabs": kind_tabs(),
        "words": page_words(), "between": quote_texts.between(), "unavailable": [],
        **extra,
    }


def _quoted(workspace, text: str, duration: Decimal | None) -> dict:
    """The quote for the page, or the errors that stop it (each with its line and column)."""
    try:
        spec, quote = quote_for_workspace(workspace, text, duration_hours=duration)
    except DomainError as error:
        return {"errors": quote_texts.error_dicts(error), "status": error.status}
    hours = hours_of(round(quote.expected_duration_hours * 3600))
    return {"quote": quote, "rows": quote_rows(quote, spec.kind), "common": common_tradeoffs(quote),
            "unavailable": quote_texts.unavailable(quote.to_json()), "duration_hours": hours, "kind": spec.kind,
            "image_pulls": secrets.image_pulls(workspace, spec), "status": 200}


@login_required
@require_http_methods(["GET", "POST"])
def submit(request):
    if request.method == "POST":
        return _post(request)
    clone = None
    if "from" in request.GET:
        clone = clone_source(request.user, request.GET["from"])
        workspace = clone.workspace
    else:
        workspace = current_workspace(request)
    context = _context(request, workspace, clone=clone)
    text, duration = "", None
    if clone is not None:
        text, duration = clone.spec_text, hours_of(clone.expected_duration_s)
    elif key := request.GET.get("example"):
        if key not in context["example_texts"]:
            raise Http404("No such example")
        text = context["example_texts"][key]
    if text:
        context["spec_text"] = text
        if duration is not None:
            context["duration_hours"] = duration
        if context["may_submit"]:
            # the page was asked for properly (200) whatever the spec says now; its errors are shown
            context.update(_quoted(workspace, text, duration))
    return render(request, "scheduling/submit.html", context)


def _post(request):
    form = SubmitForm(request.POST)
    slug = request.POST.get("workspace", "")
    workspace = portal_selectors.get_workspace_for_user(request.user, slug) if slug else current_workspace(request)
    context = _context(request, workspace, spec_text=request.POST.get("spec", ""))
    if workspace is None or not context["may_submit"]:
        return render(request, "scheduling/submit.html", context, status=403)
    if not form.is_valid():
        context["errors"] = [{"line": None, "column": None, "field": field, "message": message}
                             for field, messages in form.errors.items() for message in messages]
        context["duration_hours"] = request.POST.get("duration_hours", "")
        return render(request, "scheduling/submit.html", context, status=400)
    data = form.cleaned_data
    duration = data["duration_hours"]
    if data["option"]:
        # a spec with `schedule:` makes a schedule, whose runs are the jobs
        submit_spec = submit_quoted_schedule if has_schedule(data["spec"]) else submit_quoted_job
        try:
            made = submit_spec(user=request.user, workspace=workspace, spec=data["spec"], option=data["option"],
                               duration_hours=duration)
        except DomainError as error:
            context.update(errors=quote_texts.error_dicts(error), duration_hours=duration or DEFAULT_HOURS)
            return render(request, "scheduling/submit.html", context, status=error.status)
        return redirect("schedule" if has_schedule(data["spec"]) else "job", pk=made.pk)
    quoted = _quoted(workspace, data["spec"], duration)
    context.update(quoted)
    return render(request, "scheduling/submit.html", context, status=quoted["status"])
