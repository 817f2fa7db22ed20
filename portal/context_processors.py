from django.conf import settings
from django.utils import timezone

from portal.selectors import current_workspace, my_membership, my_workspaces
from scheduling.api import clock


def time_zone(request):
    """The zone this page's times are shown in (TimeZoneMiddleware chose it), for the header and
    scripts; and the platform's, which billing's days and months are counted in. `platform_now`: the platform
    clock's time, for "printed at" and "... ago" (the template tags `now` and `timesince` read the machine's)."""
    return {"time_zone": timezone.get_current_timezone_name(), "platform_time_zone": settings.TIME_ZONE,
            "platform_now": clock.now()}


def workspaces(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    workspace = current_workspace(request)
    membership = my_membership(request, workspace)
    # A page never offers an action the user's role would then be refused.
    return {"my_workspaces": my_workspaces(request), "current_workspace": workspace,
            "can_submit": bool(membership and membership.can_submit)}
