"""The signed-in user's SSH keys for the gateway: add one (name and public key), see each one's fingerprint
and last use, delete one. The page also shows the gateway's own host key fingerprint, to check on first connect."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from portal import ssh_access, ssh_keys
from scheduling.api import DomainError


@login_required
@require_http_methods(["GET", "POST"])
def ssh_keys_page(request):
    values, errors, status = {"name": "", "public_key": ""}, {}, 200
    if request.method == "POST" and "delete" in request.POST:
        ssh_keys.delete_key(request.user, request.POST["delete"])  # a bad id: DomainError, a 400 page
        messages.success(request, gettext("Key deleted: the gateway refuses it from now on."))
        return redirect("ssh-keys")
    if request.method == "POST":
        values = {key: request.POST.get(key, "") for key in values}
        try:
            key = ssh_keys.add_key(request.user, values["name"], values["public_key"])
        except DomainError as error:
            errors, status = error.errors, 400
        else:
            messages.success(request, gettext("Key %(name)s added (%(fingerprint)s).") % {
                "name": key.name, "fingerprint": key.fingerprint})
            return redirect("ssh-keys")
    return render(request, "portal/ssh_keys.html", {
        "keys": ssh_keys.keys_of(request.user), "values": values, "errors": errors,
        "host_fingerprint": ssh_access.host_fingerprint(), "gateway_host": settings.SSH_GATEWAY_HOST,
        "gateway_port": settings.SSH_GATEWAY_PORT,
    }, status=status)
