"""The signed-in user's API tokens: make one (name, scope, lifetime), see when each was last used,
revoke one."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from portal import services
from portal.models import ApiToken, TokenScope
from scheduling.api import DomainError, clock


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request):
    if request.method == "POST" and "revoke" in request.POST:
        services.revoke_api_token(request.user, request.POST["revoke"])  # a bad id: DomainError, a 400 page
        messages.success(request, gettext("Token revoked: it is refused from now on."))
        return redirect("api-tokens")
    values = {"name": "", "scope": TokenScope.SUBMIT, "days": str(services.DEFAULT_TOKEN_DAYS)}
    errors, new_raw, new_token, status = {}, None, None, 200
    if request.method == "POST":
        values = {key: request.POST.get(key, default) for key, default in values.items()}
        try:
            new_token, new_raw = services.create_api_token(request.user, values["name"], scope=values["scope"],
                                                           days=values["days"])
        except DomainError as error:
            errors, status = error.errors, 400
        else:
            values["name"] = ""
    now = clock.now()
    tokens = [(t, t.expired_at(now)) for t in ApiToken.objects.filter(user=request.user)]
    return render(request, "portal/api_tokens.html", {
        "tokens": tokens, "new_raw": new_raw, "new_token": new_token, "errors": errors, "values": values,
        "scopes": TokenScope.choices, "lifetimes": [(str(d), now + timedelta(days=d)) for d in services.TOKEN_DAYS],
    }, status=status)


@login_required
@require_http_methods(["GET"])
def api_token_revoke(request, pk):
    """Asks before a token is revoked: scripts and gpuctl profiles using it stop working at once. The
    confirmation posts to the list, which revokes."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user, revoked__isnull=True)
    return render(request, "portal/api_token_revoke.html", {"token": token})
