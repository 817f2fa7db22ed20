"""/device/: where a signed-in person approves a `gpuctl login` (portal.device_login). They type the code the
CLI shows (or follow its link, which fills it in), see the client and the scope it asks for, and approve or
deny. A code that waits for no sign-in is a form error."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from portal import device_login
from scheduling.api import DomainError


class UserCodeForm(forms.Form):
    user_code = forms.CharField(label=_("Code"), max_length=20, help_text=_("The code gpuctl shows, e.g. WDJB-MJHT"),
                                widget=forms.TextInput(attrs={"id": "f-user-code", "autocomplete": "off",
                                                              "autocapitalize": "characters"}))


@login_required
@require_http_methods(["GET", "POST"])
def device(request):
    """GET: the code form (filled from ?user_code=). POST user_code: what is asked. POST with decision:
    approve or deny it."""
    data = request.POST if request.method == "POST" else request.GET
    form = UserCodeForm(data if request.method == "POST" or data.get("user_code") else None)
    if not form.is_bound or not form.is_valid():
        return render(request, "portal/device.html", {"form": form, "step": "code"},
                      status=400 if form.is_bound else 200)
    decision = request.POST.get("decision") if request.method == "POST" else None
    try:
        if decision in ("approve", "deny"):
            authorization = device_login.decide(request.user, form.cleaned_data["user_code"], decision == "approve")
            return render(request, "portal/device.html", {"step": "done", "authorization": authorization})
        authorization = device_login.pending_by_user_code(form.cleaned_data["user_code"])
    except DomainError as error:
        for messages in error.errors.values():
            for message in messages:
                form.add_error("user_code", message)
        return render(request, "portal/device.html", {"form": form, "step": "code"}, status=400)
    return render(request, "portal/device.html", {
        "step": "confirm", "authorization": authorization, "user_code": device_login.shown(authorization.user_code)})
