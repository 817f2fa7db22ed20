"""The console's page for SCIM tokens: make one (shown once), see them, revoke one."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext

from portal.console.services import ConsoleError
from portal.console.views import operator_required
from portal.scim import services
from portal.scim.models import ScimToken


@operator_required
def scim_tokens(request):
    new, errors, status = None, [], 200
    if request.method == "POST":
        if "revoke" in request.POST:
            if not request.POST["revoke"].isdigit():
                return redirect("console-scim")
            token = get_object_or_404(ScimToken, pk=request.POST["revoke"])
            services.revoke_token(request.user, token)
            messages.info(request, gettext("SCIM token %(name)s (%(hint)s…) revoked.") % {
                "name": token.name, "hint": token.hint})
            return redirect("console-scim")
        try:
            token, raw = services.create_token(request.user, request.POST.get("name", ""))
            new = {"name": token.name, "raw": raw}
        except ConsoleError as error:
            errors, status = [m for msgs in error.errors.values() for m in msgs], 400
    base = request.build_absolute_uri("/scim/v2/")
    return render(request, "console/scim_tokens.html", {
        "section": "scim", "tokens": ScimToken.objects.select_related("created_by"), "new": new,
        "errors": errors, "base_url": base}, status=status)
