"""Pages: my notifications, my choices of how I am told, and a workspace's webhook (its owners)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_http_methods

from portal.members.services import require_owner
from portal.models import NotificationEvent
from portal.notifications import selectors, services, signing
from portal.selectors import get_workspace_for_user
from scheduling.api import DomainError

PAGE_SIZE = 50


@login_required
@require_http_methods(["GET", "POST"])
def notification_list(request):
    if request.method == "POST":
        which = request.POST.get("read", "")
        count = services.mark_read(request.user, which)  # a bad value: DomainError, a 400 page
        messages.success(request, ngettext("%(count)s notification marked read.", "%(count)s notifications marked read.",
                                           count) % {"count": count})
        return redirect("notifications")
    page = Paginator(selectors.notifications_of(request.user), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "portal/notifications.html", {"page": page})


@login_required
@require_http_methods(["GET", "POST"])
def notification_settings(request):
    if request.method == "POST":
        services.save_choices(request.user, request.POST)
        messages.success(request, gettext("Notification choices saved."))
        return redirect("notification-settings")
    return render(request, "portal/notification_settings.html", {"choices": selectors.choices_of(request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def webhook(request, slug):
    """Owners only (members, viewers and finance get a 403, outsiders a 404)."""
    workspace = get_workspace_for_user(request.user, slug)
    require_owner(request.user, workspace)
    errors, new_secret, status = {}, None, 200
    url_value = request.POST.get("url", "") if request.method == "POST" else ""
    if request.method == "POST":
        action = request.POST.get("action", "save")
        try:
            if action == "save":
                _, new_secret = services.save_webhook(request.user, workspace, url_value,
                                                      active=request.POST.get("active") == "on")
                done = gettext("Webhook saved.") if new_secret is None else gettext("Webhook created.")
            elif action == "secret":
                new_secret = services.new_webhook_secret(request.user, workspace)
                done = gettext("New secret made: deliveries from now on are signed with it.")
            elif action == "ping":
                services.ping_webhook(request.user, workspace)
                done = gettext("Test event queued: see it below in a moment.")
            elif action == "remove":
                services.remove_webhook(request.user, workspace)
                done = gettext("Webhook removed.")
            else:
                raise DomainError(gettext("unknown action %(action)s") % {"action": repr(action[:20])}, field="")
        except DomainError as error:
            errors, status = error.errors, 400
        else:
            messages.success(request, done)
            if new_secret is None:
                return redirect("workspace-webhook", slug=slug)
    hook = selectors.webhook_of(workspace)
    return render(request, "portal/webhook.html", {
        "workspace": workspace, "hook": hook, "deliveries": selectors.recent_deliveries(hook),
        "errors": errors, "url_value": url_value or (hook.url if hook else ""), "new_secret": new_secret,
        "events": NotificationEvent.choices, "signature_header": signing.SIGNATURE_HEADER,
    }, status=status)
