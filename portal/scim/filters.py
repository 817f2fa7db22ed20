"""The SCIM filters identity providers send (`userName eq "x"`, `displayName eq "x"`), read by
django-scim2's parser into SQL on the users' and groups' tables."""

from django_scim.filters import FilterQuery, UserFilterQuery

from portal.scim.models import ScimGroup


class UserFilter(UserFilterQuery):
    attr_map = {
        **UserFilterQuery.attr_map,
        ("emails", None, None): "email",
        ("emails", "value", None): "email",
    }


def _groups():
    return ScimGroup


class GroupFilter(FilterQuery):
    model_getter = _groups
    attr_map = {
        ("displayName", None, None): "name",
        ("externalId", None, None): "external_id",
    }
