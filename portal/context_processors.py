from portal.selectors import current_workspace, workspaces_for


def workspaces(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"my_workspaces": list(workspaces_for(user)), "current_workspace": current_workspace(request)}
