"""The signed-in user's own settings: how the pages are shown to them, and their signed-in sessions."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import translation
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from portal import services, time_zones, user_sessions
from portal.identity import mfa
from portal.models import UserSession
from portal.selectors import chosen_language, chosen_time_zone
from scheduling.api import DomainError, clock


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request):
    if request.method == "POST":
        try:
            _save(request)
        except DomainError as error:
            return _page(request, errors=error.errors, status=400)
        # in the language just chosen, which this request was not yet read in
        with translation.override(chosen_language(request.user) or translation.get_language()):
            messages.success(request, gettext("Preferences saved."))
        return redirect("preferences")
    return _page(request)


def _save(request) -> None:
    if "time_zone" not in request.POST:
        raise DomainError("choose a time zone", field="time_zone")
    if "language" in request.POST:  # validated before anything is saved
        services.set_language(request.user, request.POST["language"])
    services.set_time_zone(request.user, request.POST["time_zone"])


def _page(request, *, errors=None, status=200):
    return render(request, "portal/preferences.html", {
        "chosen_time_zone": chosen_time_zone(request.user), "time_zones": time_zones.choosable(),
        "now": clock.now(), "errors": errors or {},
        "chosen_language": chosen_language(request.user), "languages": settings.LANGUAGES,
        **_security(request.user),
    }, status=status)


def _security(user) -> dict:
    """For the links to the account's own security pages: two-factor authentication and the e-mail address
    are a local account's (a company or directory account has its provider's)."""
    return {"local_account": mfa.is_local(user), "mfa_on": mfa.has_totp(user)}


@login_required
@require_http_methods(["GET"])
def sessions(request):
    """The user's signed-in sessions; each can be ended (the current one signs them out)."""
    rows = user_sessions.sessions_of(request.user)
    for row in rows:
        row.device = user_sessions.device(row.user_agent)
        row.current = row.session_key == request.session.session_key
    return render(request, "portal/sessions.html", {"rows": rows, **_security(request.user)})


@login_required
@require_http_methods(["POST"])
def session_end(request, session_id: int):
    """End one of the user's sessions; another user's is not found (404)."""
    row = get_object_or_404(UserSession, pk=session_id, user=request.user)
    if row.session_key == request.session.session_key:
        logout(request)
        return redirect("login")
    user_sessions.end(row)
    messages.success(request, gettext("Session ended: that browser is signed out."))
    return redirect("account-sessions")
