"""The signed-in user's own settings: how the pages are shown to them."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal import services, time_zones
from portal.selectors import chosen_time_zone
from scheduling import clock
from scheduling.errors import DomainError


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request):
    if request.method == "POST":
        try:
            _save(request)
        except DomainError as error:
            return _page(request, errors=error.errors, status=400)
        messages.success(request, "Preferences saved.")
        return redirect("preferences")
    return _page(request)


def _save(request) -> None:
    if "time_zone" not in request.POST:
        raise DomainError("choose a time zone", field="time_zone")
    services.set_time_zone(request.user, request.POST["time_zone"])


def _page(request, *, errors=None, status=200):
    return render(request, "portal/preferences.html", {
        "chosen_time_zone": chosen_time_zone(request.user), "time_zones": time_zones.choosable(),
        "now": clock.now(), "errors": errors or {},
    }, status=status)
