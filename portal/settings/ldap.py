"""Sign-in against an LDAP directory (OpenLDAP, Active Directory) through django-python3-ldap; off unless
LDAP_AUTH_URL is set. How it is wired (bind, user search, groups to roles): portal/identity/ldap.py."""

import os
import ssl

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import env_bool, env_list

# One or more servers, comma separated: ldap://host:389 (with LDAP_AUTH_USE_TLS for StartTLS) or ldaps://host:636.
LDAP_AUTH_URL = env_list("LDAP_AUTH_URL", "")
LDAP_ENABLED = bool(LDAP_AUTH_URL)
LDAP_AUTH_USE_TLS = env_bool("LDAP_AUTH_USE_TLS", False)
# The CA bundle the server's certificate is checked against (StartTLS and ldaps://); empty: the system's.
LDAP_AUTH_CA_FILE = os.environ.get("LDAP_AUTH_CA_FILE", "")
LDAP_AUTH_TLS_ARGS = {"validate": ssl.CERT_REQUIRED, **({"ca_certs_file": LDAP_AUTH_CA_FILE} if LDAP_AUTH_CA_FILE else {})}
LDAP_AUTH_TLS_VERSION = ssl.PROTOCOL_TLS_CLIENT
LDAP_AUTH_TLS_CIPHERS = None  # the system's defaults, not OpenSSL's "ALL"
# Where users are searched, and the object class a user entry has.
LDAP_AUTH_SEARCH_BASE = os.environ.get("LDAP_AUTH_SEARCH_BASE", "")
LDAP_AUTH_OBJECT_CLASS = os.environ.get("LDAP_AUTH_OBJECT_CLASS", "inetOrgPerson")
# The account fields read from the user's entry: the username attribute is the one people type
# (uid on OpenLDAP, sAMAccountName on Active Directory); an empty attribute is not read.
LDAP_AUTH_USER_FIELDS = {field: attribute for field, attribute in {
    "username": os.environ.get("LDAP_AUTH_USERNAME_ATTRIBUTE", "uid"),
    "email": os.environ.get("LDAP_AUTH_EMAIL_ATTRIBUTE", "mail"),
    "first_name": os.environ.get("LDAP_AUTH_FIRST_NAME_ATTRIBUTE", "givenName"),
    "last_name": os.environ.get("LDAP_AUTH_LAST_NAME_ATTRIBUTE", "sn"),
}.items() if attribute}
LDAP_AUTH_USER_LOOKUP_FIELDS = ("username",)
# The name the person binds as, {username} their typed username (escaped): a DN on OpenLDAP (default:
# <username attribute>={username},<search base>), {username}@corp.example.com or CORP\{username} on Active Directory.
LDAP_AUTH_BIND_TEMPLATE = os.environ.get(
    "LDAP_AUTH_BIND_TEMPLATE",
    f"{LDAP_AUTH_USER_FIELDS.get('username', 'uid')}={{username}},{LDAP_AUTH_SEARCH_BASE}")
# The service account the user and group searches run as (after the person's own bind proved the password);
# empty: the searches run as the person.
LDAP_AUTH_CONNECTION_USERNAME = os.environ.get("LDAP_AUTH_BIND_DN", "") or None
LDAP_AUTH_CONNECTION_PASSWORD = os.environ.get("LDAP_AUTH_BIND_PASSWORD", "") or None
# Search, then bind (instead of LDAP_AUTH_BIND_TEMPLATE, for users whose DN cannot be spelled from their name,
# e.g. in several OUs): the service account searches LDAP_AUTH_SEARCH_BASE with this filter ({username}: the
# typed name, escaped), e.g. (uid={username}) or (&(sAMAccountName={username})(memberOf=cn=gpu,ou=groups,...)),
# and the password is checked by binding as the one entry found (none or several: the sign-in fails).
# It must find people by the username attribute: the entry the portal reads is found by that attribute.
LDAP_AUTH_USER_SEARCH_FILTER = os.environ.get("LDAP_AUTH_USER_SEARCH_FILTER", "")
LDAP_AUTH_CONNECT_TIMEOUT = int(os.environ.get("LDAP_AUTH_CONNECT_TIMEOUT_S", "5"))
LDAP_AUTH_RECEIVE_TIMEOUT = int(os.environ.get("LDAP_AUTH_RECEIVE_TIMEOUT_S", "10"))
LDAP_AUTH_POOL_ACTIVE = 1  # each server tried once per sign-in: a directory that is down fails the try, never hangs it

# The person's groups, whose names (LDAP_GROUP_NAME_ATTRIBUTE, cn) map to workspace roles at each sign-in
# (IDENTITY_GROUP_ROLES and the console's group mappings). Either searched under LDAP_GROUP_SEARCH_BASE with
# LDAP_GROUP_SEARCH_FILTER ({user_dn}, {username}: escaped), or read from the user's own LDAP_USER_GROUPS_ATTRIBUTE
# (memberOf: group DNs, the name taken from each one's first part). Neither set: groups are not read.
LDAP_GROUP_SEARCH_BASE = os.environ.get("LDAP_GROUP_SEARCH_BASE", "")
LDAP_GROUP_SEARCH_FILTER = os.environ.get("LDAP_GROUP_SEARCH_FILTER", "(member={user_dn})")
LDAP_GROUP_NAME_ATTRIBUTE = os.environ.get("LDAP_GROUP_NAME_ATTRIBUTE", "cn")
LDAP_USER_GROUPS_ATTRIBUTE = os.environ.get("LDAP_USER_GROUPS_ATTRIBUTE", "")

# django-python3-ldap's hooks, all in portal/identity/ldap.py
LDAP_AUTH_FORMAT_USERNAME = "portal.identity.ldap.bind_name"
LDAP_AUTH_FORMAT_SEARCH_FILTERS = "portal.identity.ldap.search_filters"
LDAP_AUTH_SYNC_USER_RELATIONS = "portal.identity.ldap.sync_groups"

if LDAP_ENABLED and not LDAP_AUTH_SEARCH_BASE:
    raise ImproperlyConfigured("LDAP_AUTH_URL is set: LDAP_AUTH_SEARCH_BASE must be too")
if LDAP_ENABLED and LDAP_AUTH_USER_SEARCH_FILTER:
    if "{username}" not in LDAP_AUTH_USER_SEARCH_FILTER:
        raise ImproperlyConfigured("LDAP_AUTH_USER_SEARCH_FILTER must contain {username}")
    if not LDAP_AUTH_CONNECTION_USERNAME:
        raise ImproperlyConfigured("LDAP_AUTH_USER_SEARCH_FILTER needs LDAP_AUTH_BIND_DN (the account that searches)")
elif LDAP_ENABLED and "{username}" not in LDAP_AUTH_BIND_TEMPLATE:
    raise ImproperlyConfigured("LDAP_AUTH_BIND_TEMPLATE must contain {username}")
if LDAP_ENABLED and LDAP_AUTH_CA_FILE and not os.path.isfile(LDAP_AUTH_CA_FILE):
    raise ImproperlyConfigured(f"LDAP_AUTH_CA_FILE={LDAP_AUTH_CA_FILE}: no such file (the CA bundle the "
                               "directory's certificate is checked against)")


def ldaps_connect_args(urls: list[str], tls_args: dict) -> dict:
    """For ldaps:// URLs, the certificate check (ldap3 would otherwise wrap the socket without one); StartTLS
    gets the same check from LDAP_AUTH_USE_TLS."""
    if not any(url.lower().startswith("ldaps:") for url in urls):
        return {}
    import ldap3

    return {"tls": ldap3.Tls(version=LDAP_AUTH_TLS_VERSION, ciphers=None, **tls_args)}


LDAP_AUTH_CONNECT_ARGS = ldaps_connect_args(LDAP_AUTH_URL, LDAP_AUTH_TLS_ARGS) if LDAP_ENABLED else {}
