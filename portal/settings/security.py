"""Secrets, hosts, sign-in (password hashing, lockout), HTTPS and browser headers, rate limits."""

import base64
import hashlib
import ipaddress
import json
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import DEBUG, VAR_DIR, env_bool, env_list
from portal.settings.identity import OIDC_PROVIDERS
from portal.settings.ldap import LDAP_ENABLED


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Development only: a random key kept under var/ (git-ignored), never in the repo.
    return kept_secret_key(VAR_DIR / "secret-key")


def kept_secret_key(key_file: Path) -> str:
    """The key in `key_file`, made there first if missing. Processes that start together (test workers,
    `make run`'s servers) all get the first one's key: it is written aside, then linked in place, which
    fails if another process's key got there first, so no process reads a half-written file."""
    if not key_file.exists():
        aside = key_file.with_name(f".{key_file.name}.{os.getpid()}")
        aside.write_text(secrets.token_urlsafe(50))
        try:
            os.link(aside, key_file)
        except FileExistsError:
            pass
        finally:
            aside.unlink()
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()


def _derived_secrets_key(secret_key: str) -> str:
    """Development and tests only: a Fernet key made from SECRET_KEY."""
    digest = hashlib.sha256(b"gpu-platform secrets:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


# Workspace secrets and registry passwords are encrypted with these Fernet keys (scheduling/secrets.py): the first
# encrypts, all decrypt. Make one with `manage.py rotate_secrets_key --new-key`; put a new key first, then run
# `manage.py rotate_secrets_key`. Unset under DEBUG: a key derived from SECRET_KEY; required otherwise (a value
# is then neither stored nor read without it).
SECRETS_KEY = env_list("SECRETS_KEY", "") or ([_derived_secrets_key(SECRET_KEY)] if DEBUG else [])
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# Notebooks (and any other web page a job serves) on their own origin, one host per notebook: `{id}` is the
# leftmost label of the host (portal/notebook_origin.py). Not the portal's host, not in ALLOWED_HOSTS: the
# portal's pages and API are never served there, and its host-only cookies never sent there.
NOTEBOOK_ORIGIN = os.environ.get("NOTEBOOK_ORIGIN", "http://{id}.nb.localhost:8001")
NOTEBOOK_TICKET_SECONDS = int(os.environ.get("NOTEBOOK_TICKET_SECONDS", "120"))  # the portal's ticket, used once
NOTEBOOK_SESSION_SECONDS = int(os.environ.get("NOTEBOOK_SESSION_SECONDS", "43200"))  # the notebook host's cookie

# The SSH gateway (portal/ssh_gateway.py): its port, the host name users connect to (shown by the portal and
# gpuctl), its host key (made once, kept in VAR_DIR unless a path is given: a Kubernetes Secret), and how many
# refused attempts per source address and per key it takes in SSH_AUTH_WINDOW_SECONDS before it refuses all.
SSH_GATEWAY_PORT = int(os.environ.get("SSH_GATEWAY_PORT", "2222"))
SSH_GATEWAY_HOST = os.environ.get("SSH_GATEWAY_HOST", "127.0.0.1")
SSH_HOST_KEY_PATH = os.environ.get("SSH_HOST_KEY_PATH", "")
SSH_AUTH_FAILURES_PER_SOURCE = int(os.environ.get("SSH_AUTH_FAILURES_PER_SOURCE", "20"))
SSH_AUTH_FAILURES_PER_KEY = int(os.environ.get("SSH_AUTH_FAILURES_PER_KEY", "10"))
SSH_AUTH_WINDOW_SECONDS = int(os.environ.get("SSH_AUTH_WINDOW_SECONDS", "600"))

# --- auth ---------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "portal.login_backoff.LoginBackoffBackend",  # first: within a back-off, no password is read
    "django.contrib.auth.backends.ModelBackend",
    # after the local accounts, only when LDAP_AUTH_URL is set (portal/settings/ldap.py)
    *(["portal.identity.ldap.LDAPBackend"] if LDAP_ENABLED else []),
    "allauth.account.auth_backends.AuthenticationBackend",  # signs in those an OIDC provider vouched for
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if env_bool("TEST_FAST_PASSWORD_HASHER", False):
    # Tests only (and the server processes they start): hashing demo passwords with PBKDF2
    # would dominate the suite's run time.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                        "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# Repeated failed sign-ins slow the account down (portal.login_backoff): after FREE_FAILURES in a row, it
# waits BASE_S, doubled by each further failure up to MAX_S; a success, or RESET_S without a failure, forgets.
LOGIN_BACKOFF_FREE_FAILURES = int(os.environ.get("LOGIN_BACKOFF_FREE_FAILURES", "5"))
LOGIN_BACKOFF_BASE_S = int(os.environ.get("LOGIN_BACKOFF_BASE_S", "2"))
LOGIN_BACKOFF_MAX_S = int(os.environ.get("LOGIN_BACKOFF_MAX_S", "60"))
LOGIN_BACKOFF_RESET_S = int(os.environ.get("LOGIN_BACKOFF_RESET_S", "900"))

# --- HTTPS and headers (production: DEBUG=0) ------------------------------------------------
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0" if DEBUG else "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Content-Security-Policy (django-csp): scripts only from our own static files, never inline.
# Inline styles stay allowed: plotly injects <style> elements for its charts. Forms post to the portal only,
# and on to a company sign-in provider: signing in and out there is a post the portal answers with a redirect
# to it, which browsers hold to form-action too.
def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"



CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'", *sorted({_origin(p["issuer"]) for p in OIDC_PROVIDERS})],
        "frame-ancestors": ["'none'"],
    },
}

# Rate limits, "requests/seconds": sign-in posts (/login/ and /admin/login/) per client address, `gpuctl login`'s
# device endpoints and /device/ posts per client address, API
# requests per token (its digest, however the header spells it) or signed-in user, node-agent requests per
# node token, /serve/ calls per caller and service, SCIM calls (/scim/v2/) per SCIM token. Over the limit: 429
# with Retry-After. Counted in CACHES.
RATE_LIMITS = {
    "login": os.environ.get("RATE_LIMIT_LOGIN", "30/60"),
    "device": os.environ.get("RATE_LIMIT_DEVICE", "60/60"),
    "api_token": os.environ.get("RATE_LIMIT_API_TOKEN", "600/60"),
    "agent": os.environ.get("RATE_LIMIT_AGENT", "120/60"),
    "serve": os.environ.get("RATE_LIMIT_SERVE", "600/60"),
    "scim": os.environ.get("RATE_LIMIT_SCIM", "600/60"),  # an identity provider's first sync comes in bursts
}
# The proxies (CIDRs) whose X-Forwarded-For is believed: the client's address is the right-most one in it
# that is not a trusted proxy. Empty: the direct peer is the client (X-Forwarded-For is ignored).
def _networks(name: str) -> list[str]:
    try:
        return [str(ipaddress.ip_network(cidr, strict=False)) for cidr in env_list(name, "")]
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}: {error}") from None


TRUSTED_PROXIES = _networks("TRUSTED_PROXIES")
# /metrics asks for this bearer token when set; unset (make run), it is open and shows no workspace series
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")

# Request bodies, refused at the door (portal.door) before Django reads them: a declared Content-Length
# over the route's limit at once, a chunked body as soon as it grows past it (413). The API and pages take
# 1 MiB; only the routes that carry data take more. The Helm ingress sets the same limits.
BODY_LIMIT_BYTES = int(os.environ.get("BODY_LIMIT_BYTES", str(1024 * 1024)))
# the node agents' ingest (/api/v1/agent/): a batch of 500 samples is ~150 kB; an agent halves its batch on 413
BODY_LIMIT_AGENT_BYTES = int(os.environ.get("BODY_LIMIT_AGENT_BYTES", str(2_621_440)))
# the capacity planner's trace upload (/console/planner/): a trace of up to 5 MiB, plus the form
BODY_LIMIT_PLANNER_BYTES = int(os.environ.get("BODY_LIMIT_PLANNER_BYTES", str(6 * 1024 * 1024)))
# inference requests (/serve/): prompts with images or long contexts
BODY_LIMIT_SERVE_BYTES = int(os.environ.get("BODY_LIMIT_SERVE_BYTES", str(2_621_440)))
# a notebook's own requests (/nb/): JupyterLab uploads a file in 1 MiB chunks, base64 in JSON (~1.4 MB each)
BODY_LIMIT_NOTEBOOK_BYTES = int(os.environ.get("BODY_LIMIT_NOTEBOOK_BYTES", str(2_621_440)))
# file uploads to a workspace's volumes
BODY_LIMIT_VOLUME_BYTES = int(os.environ.get("BODY_LIMIT_VOLUME_BYTES", str(1024 * 1024 * 1024)))

# A database seen down: requests are answered 503 at once (portal.door) and the database is probed again
# this often until it answers.
DB_BREAKER_PROBE_S = float(os.environ.get("DB_BREAKER_PROBE_S", "1"))
# Requests whose views run at once in one web process (portal.door); the rest wait their turn, first come first
# served. Fewer than the database pool's connections, so that no request times out waiting for one. 0: no bound.
WEB_REQUESTS_AT_ONCE = int(os.environ.get("WEB_REQUESTS_AT_ONCE", "2"))
# Django's own check on a body it reads (files excepted) is a backstop behind the door's limits.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(BODY_LIMIT_BYTES, BODY_LIMIT_AGENT_BYTES, BODY_LIMIT_SERVE_BYTES,
                                  BODY_LIMIT_NOTEBOOK_BYTES)

# Company sign-in: directory groups to workspace roles and staff, beside the console's mappings
# (portal.identity.groups); a malformed value is an error at start rather than a silent no-op
try:
    IDENTITY_GROUP_ROLES = json.loads(os.environ.get("IDENTITY_GROUP_ROLES") or "{}")
except ValueError as error:
    raise ImproperlyConfigured(f"IDENTITY_GROUP_ROLES is not JSON: {error}") from None
if not isinstance(IDENTITY_GROUP_ROLES, dict):
    raise ImproperlyConfigured("IDENTITY_GROUP_ROLES must be a JSON object: {group: [{workspace, role} or {staff}]}")

# SCIM provisioning (/scim/v2/, portal.scim): django-scim2 on the portal's accounts and SCIM groups; only a
# SCIM token (made on /console/identity/scim/) opens it. Off: /scim/v2/ answers 404 to every call, tokens or not.
SCIM_ENABLED = env_bool("SCIM_ENABLED", True)
SCIM_SERVICE_PROVIDER = {
    "USER_ADAPTER": "portal.scim.adapters.ScimUserAdapter",
    "GROUP_ADAPTER": "portal.scim.adapters.ScimGroupAdapter",
    "GROUP_MODEL": "portal.scim.models.ScimGroup",
    "USER_FILTER_PARSER": "portal.scim.filters.UserFilter",
    "GROUP_FILTER_PARSER": "portal.scim.filters.GroupFilter",
    "SERVICE_PROVIDER_CONFIG_MODEL": "portal.scim.adapters.ServiceProviderConfig",
    "BASE_LOCATION_GETTER": "portal.scim.adapters.base_location",
    "AUTHENTICATION_SCHEMES": [{"type": "oauthbearertoken", "name": "Bearer token", "primary": True,
                                "description": "A SCIM token made by an operator on /console/identity/scim/"}],
    "WWW_AUTHENTICATE_HEADER": 'Bearer realm="scim"',
}
