"""SCIM's Users and Groups on the portal's accounts and ScimGroup: django-scim2's adapters, with the input
checked field by field (a wrong type answers 400 invalidValue, nothing is changed) and PATCH read in the
shapes Okta and Microsoft Entra send:

    {"op": "replace", "value": {"active": false}}                 (Okta: no path, a dict of attributes)
    {"op": "Replace", "path": "active", "value": "False"}         (Entra: the op capitalised, booleans as text)
    {"op": "add", "path": "members", "value": [{"value": "42"}]}
    {"op": "remove", "path": "members[value eq \"42\"]"}

Attributes the portal does not keep (title, phone numbers, the enterprise extension...) are accepted and
ignored: identity providers send whatever their mapping holds.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from django.urls import reverse
from django_scim import constants, exceptions
from django_scim.adapters import SCIMGroup, SCIMUser
from django_scim.models import SCIMServiceProviderConfig

from portal.console import audit
from portal.scim import services
from portal.scim.models import ScimAccount, ScimGroup
from scheduling.api import clock

USER_URN = constants.SchemaURI.USER.lower() + ":"
GROUP_URN = constants.SchemaURI.GROUP.lower() + ":"
MEMBER_FILTER = re.compile(r'^members\[\s*value\s+eq\s+"([^"]*)"\s*\]$', re.IGNORECASE)
EMAIL_FILTER = re.compile(r"^emails\[[^\]]*\]\.value$", re.IGNORECASE)
ID_DIGITS = 18  # more cannot be a row's id (and would overflow the database's integer)
MAX_PAGE = 200
USER_FIELDS = ("username", "email", "first_name", "last_name")


def base_location(request=None, *args, **kwargs) -> str:
    return request.build_absolute_uri("/") if request is not None else ""


def bad(detail: str, scim_type: str = "invalidValue") -> exceptions.BadRequestError:
    return exceptions.BadRequestError(detail, scim_type=scim_type)


def as_bool(name: str, value) -> bool:
    """A boolean, or its text as Entra sends it ("True", "false")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise bad(f'"{name}" must be a boolean, not {value!r}'[:300])


def as_text(name: str, value, *, most: int, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or "\x00" in value:
        raise bad(f'"{name}" must be a string')
    value = value.strip()
    if required and not value:
        raise bad(f'"{name}" is required')
    if len(value) > most:
        raise bad(f'"{name}" is longer than {most} characters')
    return value


def as_email(value) -> str:
    if isinstance(value, list):  # [{"value": ..., "primary": true}, ...]: the primary, else the first
        if not all(isinstance(e, dict) for e in value):
            raise bad('"emails" must be a list of objects')
        chosen = sorted(value, key=lambda e: not e.get("primary"))
        value = chosen[0].get("value") if chosen else ""
    elif isinstance(value, dict):  # OneLogin sends one object
        value = value.get("value")
    email = as_text("emails", value, most=254)
    if email:
        try:
            EmailValidator()(email)
        except ValidationError:
            raise bad(f"{email[:100]!r} is not an e-mail address") from None
    return email


def attribute(path, urn: str) -> str:
    """A path as compared here: without the resource's schema URN, in lower case."""
    if not isinstance(path, str) or not path.strip():
        raise bad('"path" must be a non-empty string', "invalidPath")
    name = path.strip().lower()
    return name[len(urn):] if name.startswith(urn) else name


def read_operations(body: dict) -> list[tuple[str, str | None, object]]:
    """(op, path, value) of each operation of a PatchOp body; any malformed one refuses them all."""
    operations = body.get("Operations")
    if not isinstance(operations, list) or not operations:
        raise bad('a PATCH needs "Operations": a non-empty list', "invalidSyntax")
    read = []
    for operation in operations:
        if not isinstance(operation, dict):
            raise bad("each operation must be an object", "invalidSyntax")
        op = operation.get("op")
        if not isinstance(op, str) or op.lower() not in constants.VALID_PATCH_OPS:
            raise bad(f'"op" must be one of add, remove, replace, not {op!r}'[:300], "invalidSyntax")
        path = operation.get("path")
        if path is not None and not isinstance(path, str):
            raise bad('"path" must be a string', "invalidPath")
        read.append((op.lower(), path, operation.get("value")))
    return read


def page(request) -> tuple[int, int]:
    try:
        start = int(request.GET.get("startIndex", 1))
        count = int(request.GET.get("count", 100))
    except ValueError:
        raise bad("startIndex and count must be integers") from None
    return max(start, 1), min(max(count, 0), MAX_PAGE)


def by_id(queryset, value):
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    if not text.isdigit() or len(text) > ID_DIGITS:
        return None
    return queryset.filter(pk=int(text)).first()


def visible_users():
    """The people SCIM manages: every account but service accounts, less those SCIM deleted."""
    return (get_user_model().objects.filter(service_account__isnull=True)
            .exclude(scim_account__deleted__isnull=False))


def apply_operations(adapter, body: dict) -> None:
    """A PATCH's operations, each through the adapter's `set` (an operation without a path sets every
    attribute of its value), then one save."""
    for op, path, value in read_operations(body):
        if path is None:
            if not isinstance(value, dict):
                raise bad('an operation without "path" needs an object of attributes as its "value"',
                          "invalidSyntax")
            for key, sub in value.items():
                adapter.set(key, sub, op)
        else:
            adapter.set(path, value, op)
    adapter.save()


class ServiceProviderConfig(SCIMServiceProviderConfig):
    def to_dict(self):
        d = super().to_dict()
        d.update({"filter": {"supported": True, "maxResults": MAX_PAGE}, "changePassword": {"supported": False}})
        return d


class ScimUserAdapter(SCIMUser):
    id_field = "pk"

    def __init__(self, obj, request=None, actor=None):
        super().__init__(obj, request=request)
        self.actor = actor
        self.account = ScimAccount.objects.filter(user=obj).first() if obj.pk else None
        self.external_id = self.account.external_id if self.account else ""
        self.was_active = obj.is_active if obj.pk else True
        self.before = audit.snapshot(obj, USER_FIELDS) if obj.pk else {}

    @property
    def groups(self):
        return [{"value": str(g.pk), "display": g.name, "$ref": ScimGroupAdapter(g, self.request).location}
                for g in self.obj.scim_groups.all()]

    def to_dict(self):
        user = self.obj
        return {
            "schemas": [constants.SchemaURI.USER],
            "id": self.id,
            "externalId": self.external_id or None,
            "userName": user.username,
            "name": {"givenName": user.first_name, "familyName": user.last_name, "formatted": self.display_name},
            "displayName": self.display_name,
            "emails": [{"value": user.email, "primary": True, "type": "work"}] if user.email else [],
            "active": user.is_active,
            "groups": self.groups,
            "meta": {"resourceType": self.resource_type, "created": user.date_joined.isoformat(),
                     "location": self.location},
        }

    # ---- writing: set() checks and applies one attribute; save() writes and does what `active` asks

    def set(self, path, value, op: str = "replace") -> None:
        name = attribute(path, USER_URN)
        user, removing = self.obj, op == "remove"
        if name == "active":
            if not removing:
                user.is_active = as_bool("active", value)
        elif name == "username":
            if not removing:
                user.username = as_text("userName", value, most=150, required=True)
        elif name == "externalid":
            self.external_id = "" if removing else as_text("externalId", value, most=255)
        elif name == "name":
            if removing:
                user.first_name = user.last_name = ""
            elif not isinstance(value, dict):
                raise bad('"name" must be an object')
            else:
                for key, sub in value.items():
                    if key in ("givenName", "familyName"):
                        self.set(f"name.{key}", sub, op)
        elif name == "name.givenname":
            user.first_name = "" if removing else as_text("name.givenName", value, most=150)
        elif name == "name.familyname":
            user.last_name = "" if removing else as_text("name.familyName", value, most=150)
        elif name == "emails" or EMAIL_FILTER.match(name):
            user.email = "" if removing else as_email(value)
        # anything else (displayName, title, phoneNumbers, the enterprise extension...): not kept here

    def from_dict(self, d):
        if "userName" not in d:
            raise bad('"userName" is required')
        for key, value in d.items():
            if key not in ("schemas", "id", "meta", "groups", "password"):
                self.set(key, value)

    def check_unique(self) -> None:
        User = get_user_model()
        if User.objects.filter(username__iexact=self.obj.username).exclude(pk=self.obj.pk).exists():
            raise exceptions.IntegrityError(f"a user named {self.obj.username!r} exists", scim_type="uniqueness")

    def save(self):
        user, created = self.obj, self.obj.pk is None
        self.check_unique()
        if created:
            user.set_unusable_password()  # signs in through the company's sign-in, never with a password here
        active_now, user.is_active = user.is_active, (user.is_active if created else self.was_active)
        user.save()
        ScimAccount.objects.update_or_create(user=user, defaults={"external_id": self.external_id, "deleted": None})
        after = audit.snapshot(user, USER_FIELDS)
        if created or after != self.before:
            audit.record(self.actor, "create" if created else "change", user, changes=audit.diff(self.before, after),
                         message=f"{'created' if created else 'changed'} by SCIM")
        self.before = after
        if self.was_active and not active_now:
            services.deactivate(self.actor, user)
        elif not self.was_active and active_now:
            services.reactivate(self.actor, user)
        self.was_active = user.is_active

    def patch(self, body: dict) -> None:
        apply_operations(self, body)

    def delete(self):
        """The account stays (its jobs and charges are kept): deactivated, out of its SCIM groups, and gone
        from SCIM (404 from now on; a later POST of the same userName provisions it again)."""
        user = self.obj
        if user.is_active:
            services.deactivate(self.actor, user)
        groups = list(user.scim_groups.all())
        user.scim_groups.clear()
        services.apply_roles([user])
        ScimAccount.objects.update_or_create(user=user, defaults={"deleted": clock.now()})
        audit.record(self.actor, "delete", user, message="deleted by SCIM: deactivated, out of "
                                                         f"{len(groups)} SCIM group(s); the account is kept")


class ScimGroupAdapter(SCIMGroup):
    id_field = "pk"

    def __init__(self, obj, request=None, actor=None):
        super().__init__(obj, request=request)
        self.actor = actor
        self.before: set[int] = set(obj.members.values_list("pk", flat=True)) if obj.pk else set()
        self.members_now: set[int] = set(self.before)
        self.name_before = obj.name

    @property
    def members(self):
        return [{"value": str(u.pk), "display": u.username,
                 "$ref": urljoin(base_location(self.request), reverse("scim:users", kwargs={"uuid": u.pk}))}
                for u in self.obj.members.all()]

    def to_dict(self):
        return {
            "schemas": [constants.SchemaURI.GROUP],
            "id": self.id,
            "externalId": self.obj.external_id or None,
            "displayName": self.obj.name,
            "members": self.members,
            "meta": {"resourceType": self.resource_type, "created": self.obj.created.isoformat(),
                     "location": self.location},
        }

    @staticmethod
    def member_ids(value) -> set[int]:
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
            raise bad('"members" must be a list of objects with a "value"')
        wanted = [m.get("value") for m in value]
        found = {}
        for ident in wanted:
            user = by_id(visible_users(), ident)
            if user is None:
                raise bad(f"no user has the id {str(ident)[:40]!r}")
            found[user.pk] = user
        return set(found)

    def set(self, path, value, op: str) -> None:
        name = attribute(path, GROUP_URN)
        if name == "displayname":
            if op != "remove":
                self.obj.name = as_text("displayName", value, most=255, required=True)
        elif name == "externalid":
            self.obj.external_id = "" if op == "remove" else as_text("externalId", value, most=255)
        elif name == "members":
            if op == "remove":
                self.members_now -= self.member_ids(value) if value is not None else set(self.members_now)
            elif op == "add":
                self.members_now |= self.member_ids(value)
            else:
                self.members_now = self.member_ids(value or [])
        elif match := MEMBER_FILTER.match(name):
            if op != "remove":
                raise bad(f"{path!r}: only remove takes a member filter", "invalidPath")
            self.members_now -= {u for u in self.members_now if str(u) == match[1]}
        elif name in ("id", "meta", "schemas"):
            pass
        else:
            raise bad(f"a group has no attribute {str(path)[:100]!r}", "invalidPath")

    def from_dict(self, d):
        if "displayName" not in d:
            raise bad('"displayName" is required')
        self.members_now = set()
        for key, value in d.items():
            if key in ("displayName", "externalId", "members"):
                self.set(key, value, "replace")

    def save(self):
        group, created = self.obj, self.obj.pk is None
        if ScimGroup.objects.filter(name__iexact=group.name).exclude(pk=group.pk).exists():
            raise exceptions.IntegrityError(f"a group named {group.name!r} exists", scim_type="uniqueness")
        group.save()
        if self.members_now != self.before:
            group.members.set(self.members_now)
        changed = self.members_now ^ self.before
        if group.name != self.name_before:
            changed |= self.members_now  # the mapping may give the new name something else
        added, removed = sorted(self.members_now - self.before), sorted(self.before - self.members_now)
        if created or changed or group.name != self.name_before:
            audit.record(self.actor, "create" if created else "change", group,
                         changes={"name": [self.name_before or None, group.name], "members added": added,
                                  "members removed": removed},
                         message=f"SCIM group {group.name}: {len(added)} member(s) added, {len(removed)} removed")
        services.apply_roles(get_user_model().objects.filter(pk__in=changed))
        self.before, self.name_before = set(self.members_now), group.name

    def patch(self, body: dict) -> None:
        apply_operations(self, body)

    def delete(self):
        group = self.obj
        members = list(group.members.all())
        audit.record(self.actor, "delete", group, message=f"SCIM group {group.name} deleted "
                                                          f"({len(members)} member(s))")
        group.delete()
        services.apply_roles(members)
