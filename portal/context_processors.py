from portal.selectors import current_workspace, workspaces_for


def workspaces(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    workspace = current_workspace(request)
    membership = workspace.memberships.filter(user=user).first() if workspace else None
    # A page never offers an action the user's role would then be refused.
    return {"my_workspaces": list(workspaces_for(user)), "current_workspace": workspace,
            "can_submit": bool(membership and membership.can_submit)}
