"""Secrets, hosts, sign-in (password hashing, lockout), HTTPS and browser headers, rate limits."""

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from portal.settings.env import DEBUG, VAR_DIR, env_bool, env_list


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
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# --- auth ---------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
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

# Repeated failed logins: lock the (username, IP) pair for a while.
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("AXES_COOLOFF_HOURS", "0.25"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

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
# Inline styles stay allowed: plotly injects <style> elements for its charts.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Rate limits, "requests/seconds": login posts per client IP, API-token requests per token,
# node-agent requests per node token. Over the limit: 429 with Retry-After. Counted in CACHES.
RATE_LIMITS = {
    "login": os.environ.get("RATE_LIMIT_LOGIN", "30/60"),
    "api_token": os.environ.get("RATE_LIMIT_API_TOKEN", "600/60"),
    "agent": os.environ.get("RATE_LIMIT_AGENT", "120/60"),
}
# /metrics asks for this bearer token when set; unset (make run), it is open and shows no workspace series
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
