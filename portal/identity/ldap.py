"""Sign-in against an LDAP directory (settings: portal/settings/ldap.py), on django-python3-ldap.

After the local accounts (ModelBackend), LDAPBackend binds as the person (their password is checked by the
directory, never stored here): at the DN LDAP_AUTH_BIND_TEMPLATE spells from their name (direct bind), or at
the one entry the service account finds with LDAP_AUTH_USER_SEARCH_FILTER (search, then bind). Then it binds
as the service account if one is set,
finds their entry, creates or updates the Django user from it (with no usable password) and, through
sync_groups, maps their groups to workspace roles (portal.identity.groups) at every sign-in.

A failure (wrong password, unknown user, directory down) is an ordinary failed sign-in: back-off, rate limit
and audit as for local accounts. A username that is not a plain name never reaches the directory, and a
local account (one with a password of its own) is never signed in, taken over or renamed by the directory.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django_python3_ldap import auth, ldap
from ldap3 import SUBTREE
from ldap3.core.exceptions import LDAPException, LDAPSizeLimitExceededResult
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn, parse_dn

logger = logging.getLogger(__name__)

# Django's own username characters: no LDAP filter or DN syntax ever comes from what a person types.
PLAIN_USERNAME = re.compile(r"[\w.@+-]{1,150}")
# search, then bind: the DN found for the person signing in now, for bind_name (the library's hook takes no more)
_found_dn: ContextVar[str | None] = ContextVar("ldap_found_dn", default=None)


class LDAPBackend(auth.LDAPBackend):
    def authenticate(self, request=None, username=None, password=None, **kwargs):
        if not username or not password or not PLAIN_USERNAME.fullmatch(username):
            return None
        if _is_local_account(username):
            return None
        found = None
        with library_warnings() as warnings:
            try:
                if settings.LDAP_AUTH_USER_SEARCH_FILTER:
                    dn = find_user_dn(username)
                    if dn is None:
                        return None
                    found = _found_dn.set(dn)
                user = ldap.authenticate(username=username, password=password)
            except (LDAPException, OSError) as error:
                # the library catches most of these, but not one its clean-up raises after a failed StartTLS
                logger.warning("LDAP sign-in of %s failed: %s", username, type(error).__name__)
                return None
            finally:
                if found is not None:
                    _found_dn.reset(found)
                explain_certificate_failure(warnings)
        return user if user is not None and self.user_can_authenticate(user) else None

    async def aauthenticate(self, request=None, username=None, password=None, **kwargs):
        return await sync_to_async(self.authenticate)(request, username=username, password=password)


class _ThreadsWarnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.thread, self.messages = threading.get_ident(), []

    def emit(self, record):
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


@contextmanager
def library_warnings() -> Iterator[list[str]]:
    """What django-python3-ldap logs in this thread meanwhile: it logs why a connection or bind failed, and
    answers only None."""
    handler = _ThreadsWarnings()
    library = logging.getLogger("django_python3_ldap")
    library.addHandler(handler)
    try:
        yield handler.messages
    finally:
        library.removeHandler(handler)


def explain_certificate_failure(warnings: list[str]) -> None:
    """A directory whose certificate the configured CA did not sign: said in words an operator acts on (the
    library's own line is an SSL error inside a tuple)."""
    if any("CERTIFICATE_VERIFY_FAILED" in message for message in warnings):
        logger.error(
            "LDAP: the directory's TLS certificate is not signed by the CA in LDAP_AUTH_CA_FILE (%s): every "
            "directory sign-in fails until LDAP_AUTH_CA_FILE holds the CA that signed it (or its chain)",
            settings.LDAP_AUTH_CA_FILE or "empty: the system's CAs")


def _is_local_account(username: str) -> bool:
    # the directory compares names without case, so "Admin" in LDAP must not reach the local "admin"
    return any(user.has_usable_password()
               for user in get_user_model().objects.filter(username__iexact=username))


def bind_name(model_fields: dict) -> str:
    """LDAP_AUTH_FORMAT_USERNAME: the name to bind as, for the person or the service account."""
    username = model_fields["username"]
    if username == settings.LDAP_AUTH_CONNECTION_USERNAME:
        return username  # the service account's DN, as configured
    if (found := _found_dn.get()) is not None:
        return found
    return settings.LDAP_AUTH_BIND_TEMPLATE.replace("{username}", escape_rdn(username))


def find_user_dn(username: str) -> str | None:
    """Search, then bind: the DN of the one entry LDAP_AUTH_USER_SEARCH_FILTER finds for `username`, searched as
    the service account; None (logged) when the directory cannot be searched or finds none or several."""
    search_filter = settings.LDAP_AUTH_USER_SEARCH_FILTER.replace("{username}", escape_filter_chars(username))
    with ldap.connection(username=settings.LDAP_AUTH_CONNECTION_USERNAME,
                         password=settings.LDAP_AUTH_CONNECTION_PASSWORD) as found:
        if found is None:
            return None  # the library logged why (directory down, the service account's bind refused)
        directory = found._connection  # the ldap3 connection the library wraps, bound as the service account
        try:
            directory.search(search_base=settings.LDAP_AUTH_SEARCH_BASE, search_filter=search_filter,
                             search_scope=SUBTREE, attributes=[], size_limit=2)
        except LDAPSizeLimitExceededResult:
            logger.warning("LDAP sign-in of %s refused: more than one entry matches the user search", username)
            return None
        entries = [entry["dn"] for entry in directory.response or [] if entry.get("type") == "searchResEntry"]
    if len(entries) != 1:
        logger.warning("LDAP sign-in of %s refused: %s entries match the user search", username, len(entries))
        return None
    return entries[0]


def search_filters(ldap_fields: dict) -> list[str]:
    """LDAP_AUTH_FORMAT_SEARCH_FILTERS: each value escaped, "*" included (the library's own keeps it)."""
    return [f"({escape_filter_chars(name)}={escape_filter_chars(str(value))})" for name, value in ldap_fields.items()]


def sync_groups(user, ldap_attributes, *, connection=None, dn=None) -> None:
    """LDAP_AUTH_SYNC_USER_RELATIONS: the person's groups to workspace roles, at every sign-in. Groups that
    cannot be read refuse the sign-in: memberships the directory has taken away must not stay usable."""
    from portal.identity.groups import apply_group_roles

    try:
        groups = user_groups(connection, dn, ldap_attributes, user.get_username())
    except LDAPException as error:
        logger.warning("LDAP groups of %s could not be read: %s", user.get_username(), type(error).__name__)
        raise PermissionDenied from None
    if groups is not None:
        apply_group_roles(user, groups, source="ldap")


def user_groups(connection, dn: str | None, attributes, username: str) -> list[str] | None:
    """The names of the person's groups; None when no way to read them is configured."""
    name_attribute = settings.LDAP_GROUP_NAME_ATTRIBUTE
    if settings.LDAP_USER_GROUPS_ATTRIBUTE:
        group_dns = attributes.get(settings.LDAP_USER_GROUPS_ATTRIBUTE) or []
        return sorted({_first_value(group_dn) for group_dn in _values(group_dns)} - {""})
    if not settings.LDAP_GROUP_SEARCH_BASE:
        return None
    search_filter = settings.LDAP_GROUP_SEARCH_FILTER.format(
        user_dn=escape_filter_chars(dn or ""), username=escape_filter_chars(username))
    connection.search(search_base=settings.LDAP_GROUP_SEARCH_BASE, search_filter=search_filter,
                      search_scope=SUBTREE, attributes=[name_attribute])
    names = set()
    for entry in connection.response or []:
        if entry.get("type") == "searchResEntry":
            names.update(str(value) for value in _values(entry["attributes"].get(name_attribute)))
    return sorted(names)


def _values(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _first_value(group_dn: str) -> str:
    """cn=ml-vision-owners,ou=groups,dc=example,dc=org -> ml-vision-owners"""
    try:
        return parse_dn(str(group_dn), escape=False, strip=True)[0][1]
    except (LDAPException, IndexError):
        return ""
