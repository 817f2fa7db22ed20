"""The header's language switcher: the choice is kept in the language cookie, and a signed-in
user's preference is saved too, so it follows them to other browsers."""

from django.conf import settings
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from portal import services
from scheduling.api import DomainError


@require_POST
def switch_language(request):
    language = request.POST.get("language", "")
    if language not in dict(settings.LANGUAGES):
        offered = ", ".join(code for code, _ in settings.LANGUAGES)
        raise DomainError(f"not a language; choose one of {offered}", field="language")
    if request.user.is_authenticated:
        services.set_language(request.user, language)
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = reverse("dashboard")
    response = HttpResponseRedirect(target)
    response.set_cookie(settings.LANGUAGE_COOKIE_NAME, language, max_age=365 * 24 * 3600,
                        samesite="Lax", secure=request.is_secure())
    return response
