"""The keys and limits section of a service's page: its keys (a new one's value shown once, on the page
that made it), revoke, and the service's requests and tokens per minute. Thin views over
portal.service_keys and scheduling.inference."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal import service_keys, serving
from portal.pages.notebooks import _said
from portal.pages.services import render_detail
from scheduling.api import DomainError, inference


def _back(job) -> str:
    return reverse("service", args=[job.pk]) + "#service-keys"


@require_POST
@login_required
def service_key_create(request, pk):
    job = serving.get_service_for_user(request.user, pk)
    try:
        key, raw = service_keys.create_key(request.user, job, request.POST.get("name", ""),
                                           days=request.POST.get("days", "90"),
                                           requests_per_minute=request.POST.get("requests_per_minute") or None,
                                           tokens_per_minute=request.POST.get("tokens_per_minute") or None)
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("The key was not made: %(why)s") % {"why": _said(error)})
        return redirect(_back(job))
    response = render_detail(request, job, new_key=raw, new_key_name=key.name)
    response["Cache-Control"] = "no-store"   # the key is on this page only
    return response


@require_POST
@login_required
def service_key_revoke(request, pk, key_id):
    job = serving.get_service_for_user(request.user, pk)
    try:
        key = service_keys.revoke_key(request.user, job, key_id)
        messages.success(request, _("Key %(name)s revoked: it is refused from now on.") % {"name": key.name})
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("The key was not revoked: %(why)s") % {"why": _said(error)})
    return redirect(_back(job))


@require_POST
@login_required
def service_limits(request, pk):
    job = serving.get_service_for_user(request.user, pk)
    try:
        requests, tokens = service_keys.check_limits(request.POST.get("requests_per_minute", ""),
                                                     request.POST.get("tokens_per_minute", ""))
        inference.set_limits(request.user, job, requests, tokens)
        messages.success(request, _("Limits of service %(name)s set.") % {"name": job.name})
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("The limits were not changed: %(why)s") % {"why": _said(error)})
    return redirect(_back(job))
