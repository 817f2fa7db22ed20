"""The signed-in user's own settings: how the pages are shown to them."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from portal import services, time_zones
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
    }, status=status)
