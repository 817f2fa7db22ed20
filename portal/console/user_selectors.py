"""Reads for the console's users page."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, QuerySet

from portal.models import Membership


def user_rows() -> QuerySet:
    """Every account, with its workspaces and roles, by username."""
    memberships = Membership.objects.select_related("workspace").order_by("workspace__slug")
    return get_user_model().objects.order_by("username").prefetch_related(Prefetch("memberships", queryset=memberships))
