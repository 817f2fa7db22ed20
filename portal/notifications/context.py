"""`unread_notifications` for the header's Notifications link: one count query per page."""

from portal.notifications.selectors import unread_count


def unread_notifications(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notifications": unread_count(user)}
