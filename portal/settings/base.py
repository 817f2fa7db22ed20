"""The Django project: apps, middleware, templates, languages and time, static files, the REST API."""

import os
from pathlib import Path

from portal.settings.env import BASE_DIR, VAR_DIR

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served from static/ (no CDN)
    "channels",
    "csp",
    "portal",
    "scheduling",
    "billing",
    "portal.console",
    "portal.scim",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.mfa",  # two-factor authentication (TOTP and recovery codes) for local accounts
]

MIDDLEWARE = [
    "portal.logs.RequestLogMiddleware",  # outermost: one log line per request
    "portal.middleware.NotebookHostMiddleware",  # a notebook's host gets the notebook proxy and nothing else
    "portal.metrics.MetricsMiddleware",  # counts every response, answers /metrics
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",  # after sessions, before common: cookie, Accept-Language
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.middleware.RateLimitMiddleware",  # after auth: a signed-in user is counted by id
    "portal.middleware.TimeZoneMiddleware",  # after auth: the signed-in user's zone
    "portal.middleware.UserLanguageMiddleware",  # after auth: the signed-in user's language
    "portal.user_sessions.SessionSeenMiddleware",  # after auth: the session's last seen, once a minute
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",  # after auth and messages: allauth's sign-in flows
    "portal.identity.mfa.StaffEnrolmentMiddleware",  # MFA_REQUIRED_FOR_STAFF: the console waits for enrolment
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "portal.login_backoff.LoginBackoffMiddleware",  # 429 for a sign-in within the account's back-off
    "portal.middleware.DomainErrorMiddleware",
    "portal.middleware.StyledNotFoundMiddleware",  # the styled 404 page under DEBUG too
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.workspaces",
                "portal.context_processors.time_zone",
                "portal.notifications.context.unread_notifications",
            ],
        },
    },
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- i18n / time --------------------------------------------------------------------------
LANGUAGE_CODE = "en"
# The interface languages; a signed-in user's preference wins, else the language cookie (the
# header switcher), else Accept-Language. `make messages` / `make compilemessages` keep locale/.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- static -------------------------------------------------------------------------------
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic's destination; the image collects into /app/staticfiles at build time (read-only there).
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or VAR_DIR / "staticfiles")
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve from static/ too, so tests and `make run` need no collectstatic race

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
}
# Request limits: pages of at most 500 rows, JSON nested at most 64 deep (bodies: BODY_LIMIT_* in security).
REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"] = "portal.api.pagination.Pagination"
# JSON bodies only: a form cannot carry a spec object or a typed number, and the schema names one media type
# (any other answers 415).
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = ["portal.api.parsers.JSONParser"]
REST_FRAMEWORK["TEST_REQUEST_DEFAULT_FORMAT"] = "json"
# The git commit GET /api/v1/version names (an image sets it at build); unset: the checkout's HEAD, if any
BUILD_COMMIT = os.environ.get("BUILD_COMMIT", "").strip()
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Platform API",
    "DESCRIPTION": "Workspaces, jobs, quotes and usage of the GPU platform.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from drf-spectacular-sidecar's static files: /api/docs/ works offline, under the CSP
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "portal.api.schema.add_problem_responses",
                             "portal.api.schema.declare_what_is_enforced"],
}
