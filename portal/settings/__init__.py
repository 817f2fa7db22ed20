"""Settings from environment variables, with defaults that run the embedded stack.

Embedded default: SQLite under var/ and a Redis the project starts on a unix socket under var/.
Production: set DATABASE_URL and REDIS_URL; nothing else changes.
"""

import os
import secrets
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal import logs, redis_urls

BASE_DIR = Path(__file__).resolve().parents[2]
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

TESTING = "pytest" in sys.modules


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Development only: a random key kept under var/ (git-ignored), never in the repo.
    key_file = VAR_DIR / "secret-key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

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
    "axes",
    "csp",
    "portal",
    "scheduling",
    "billing",
    "portal.console",
]

MIDDLEWARE = [
    "portal.logs.RequestLogMiddleware",  # outermost: one log line per request
    "portal.metrics.MetricsMiddleware",  # counts every response, answers /metrics
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.RateLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",  # after sessions, before common: cookie, Accept-Language
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "portal.middleware.TimeZoneMiddleware",  # after auth: the signed-in user's zone
    "portal.middleware.UserLanguageMiddleware",  # after auth: the signed-in user's language
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
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

# --- database ---------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
# No persistent connections: Daphne serves each request from a fresh thread, so kept-alive
# connections pile up (bench.ingest: 53 open in 10 s, then "too many clients"). The ASGI server
# runs with DB_POOL=1 (a psycopg pool on PostgreSQL); Celery's forked workers connect per task.
# Health checks: a connection the database dropped (restart, network cut) is replaced before a
# request uses it; with DB_POOL, the pool checks each connection it lends.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Database unreachable: a request fails (500) within seconds instead of hanging.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", int(os.environ.get("DB_CONNECT_TIMEOUT", "5")))
    if env_bool("DB_POOL", False):
        # A request waits at most `timeout` for a connection; after an outage the pool's retries
        # (1, 2, 4... s) start over every `reconnect_timeout`, so it reconnects within seconds.
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": int(os.environ.get("DB_POOL_SIZE", "10")),
            "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "5")), "reconnect_timeout": 10.0}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, for the test database: the Celery worker and Daphne processes
    # that tests start must see the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
    # WAL: readers (pages) never wait for the writer (the scheduling cycle); writers wait up to
    # `timeout` seconds for each other instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL;"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis: Celery broker and results, Channels layer, cache ------------------------------
EMBEDDED_REDIS = "REDIS_URL" not in os.environ
# Tests get their own embedded server so they never touch a running `make run`.
_embedded_socket = VAR_DIR / (f"redis-test-{os.getpid()}.sock" if TESTING else "redis.sock")
REDIS_URL = os.environ.get("REDIS_URL", f"unix://{_embedded_socket}?db=0")
redis_urls.parse(REDIS_URL)  # fail fast on a malformed URL

CELERY_BROKER_URL = redis_urls.for_celery(REDIS_URL)
CELERY_RESULT_BACKEND = redis_urls.for_celery(REDIS_URL)
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Redis pub/sub: one publish per event reaches every Daphne process, which fans it out to its
# sockets. At-most-once delivery is right for live pages (the database is the record; a page
# that missed an event catches up on reload).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_urls.for_redis_py(REDIS_URL)]},
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": redis_urls.for_redis_py(REDIS_URL),
        "KEY_PREFIX": "portal",
    }
}

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
if TESTING or env_bool("TEST_FAST_PASSWORD_HASHER", False):
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

# --- security (production: DEBUG=0) ---------------------------------------------------------
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
STATIC_ROOT = VAR_DIR / "staticfiles"
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
# Request limits: pages of at most 500 rows, JSON nested at most 64 deep, bodies of at most 2.5 MB.
REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"] = "portal.api.pagination.Pagination"
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = ["portal.api.parsers.JSONParser", "rest_framework.parsers.FormParser",
                                            "rest_framework.parsers.MultiPartParser"]
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
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
                             "portal.api.schema.add_problem_responses"],
}

# --- scheduling ------------------------------------------------------------------------------
SCHEDULER_BACKEND = os.environ.get("SCHEDULER_BACKEND", "simulated")  # simulated | kubernetes
# /metrics asks for this bearer token when set; unset (make run), it is open and shows no workspace series
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
SCHEDULER_INTERVAL_S = float(os.environ.get("SCHEDULER_INTERVAL_S", "2"))
# Inference services: how often the autoscaler scrapes and sizes each one (at most once a cycle), how
# long the endpoint holds a request while a service starts from zero, and how long a simulated
# replica takes to load its model.
SERVICE_SCALE_INTERVAL_S = float(os.environ.get("SERVICE_SCALE_INTERVAL_S", "5"))
SERVE_COLD_START_TIMEOUT_S = float(os.environ.get("SERVE_COLD_START_TIMEOUT_S", "120"))
SIM_INFERENCE_STARTUP_S = float(os.environ.get("SIM_INFERENCE_STARTUP_S", "2"))
# Time-based fair share (scheduling/cycle/usage.py): past usage over the window, halved every
# half-life, shifts over-quota weights by K; a half-life of 0 turns it off.
FAIR_SHARE_HALF_LIFE_H = float(os.environ.get("FAIR_SHARE_HALF_LIFE_H", "0"))
FAIR_SHARE_WINDOW_DAYS = float(os.environ.get("FAIR_SHARE_WINDOW_DAYS", "7"))
FAIR_SHARE_USAGE_K = float(os.environ.get("FAIR_SHARE_USAGE_K", "1"))
SIM_SPEEDUP = float(os.environ.get("SIM_SPEEDUP", "60"))  # a 1 h job runs 1 min on the simulated cluster
SIM_FAILURE_RATE = float(os.environ.get("SIM_FAILURE_RATE", "0.05"))
# The simulated cluster's real processes (notebook servers): one folder per replica with its pid, URL and log;
# notebooks' home folders per workspace and name, kept across stop and start. Tests get folders of their own.
SIM_RUNTIME_DIR = Path(os.environ.get("SIM_RUNTIME_DIR")
                       or VAR_DIR / (f"sim-runtime-test-{os.getpid()}" if TESTING else "sim-runtime"))
NOTEBOOK_HOME_DIR = Path(os.environ.get("NOTEBOOK_HOME_DIR") or (SIM_RUNTIME_DIR / "homes" if TESTING
                                                                 else VAR_DIR / "notebooks"))
# Replica logs (scheduling.logs): kept this long after the replica ended, at most this much per job
JOB_LOG_RETENTION_DAYS = int(os.environ.get("JOB_LOG_RETENTION_DAYS", "30"))
JOB_LOG_MAX_BYTES = int(os.environ.get("JOB_LOG_MAX_BYTES", str(2 * 1024 * 1024)))
JOB_LOG_TAIL_LINES = int(os.environ.get("JOB_LOG_TAIL_LINES", "5000"))  # lines read from the backend per replica
JOB_LOG_POLL_SECONDS = float(os.environ.get("JOB_LOG_POLL_SECONDS", "2"))  # follow=1: how often new lines are read
JOB_LOG_FOLLOW_SECONDS = float(os.environ.get("JOB_LOG_FOLLOW_SECONDS", "900"))  # follow=1: longest stream
USAGE_RETENTION_DAYS = int(os.environ.get("USAGE_RETENTION_DAYS", "35"))  # raw samples; ledger lines forever
LEDGER_CLOSE_GRACE_S = int(os.environ.get("LEDGER_CLOSE_GRACE_S", "300"))  # an hour's lines wait this long for late usage
# A workspace with no currency of its own is billed in this one (billing.currency); unallocated capacity,
# GPU advice and the scheduler's off-peak flag read this currency's price tables
BILLING_CURRENCY = os.environ.get("BILLING_CURRENCY", "USD").strip().upper()
# Node health: a node whose agent reported once and then stays silent this long is NotReady (its work evicted)
NODE_NOT_READY_AFTER_S = float(os.environ.get("NODE_NOT_READY_AFTER_S", "60"))
IDLE_CHECK_INTERVAL_S = float(os.environ.get("IDLE_CHECK_INTERVAL_S", "60"))  # how often idle GPU slices are looked for
# The console's per-queue allocation history: one sample per queue this often, kept this long
QUEUE_HISTORY_INTERVAL_S = float(os.environ.get("QUEUE_HISTORY_INTERVAL_S", "300"))
QUEUE_HISTORY_RETENTION_DAYS = int(os.environ.get("QUEUE_HISTORY_RETENTION_DAYS", "30"))
CELERY_BEAT_SCHEDULE = {
    "scheduling-cycle": {"task": "scheduling.tasks.scheduling_cycle", "schedule": SCHEDULER_INTERVAL_S},
    "queue-history": {"task": "portal.tasks.sample_queue_allocation", "schedule": QUEUE_HISTORY_INTERVAL_S},
    "queue-history-retention": {"task": "portal.tasks.purge_queue_allocation_history", "schedule": 6 * 3600.0},
    "job-log-retention": {"task": "scheduling.tasks.purge_old_job_logs", "schedule": 6 * 3600.0},
    "ledger-post": {"task": "billing.tasks.post_usage", "schedule": float(os.environ.get("LEDGER_POST_INTERVAL_S", "30"))},
    "export-resend": {"task": "billing.tasks.resend_waiting_exports", "schedule": 60.0},
    "usage-retention": {"task": "billing.tasks.purge_old_samples", "schedule": 6 * 3600.0},
    "idle-gpus": {"task": "billing.tasks.check_idle_gpus", "schedule": IDLE_CHECK_INTERVAL_S},
    **({"demo-load": {"task": "portal.tasks.demo_load", "schedule": float(os.environ.get("DEMO_LOAD_INTERVAL_S", "20"))}}
       if env_bool("DEMO_LOAD", False) else {}),
}
CELERY_IMPORTS = ("billing.reports.tasks", "portal.notifications.tasks")  # not apps' tasks.py: autodiscovery misses them

# --- reports and budgets -----------------------------------------------------------------------
REPORT_EXPORT_DIR = Path(os.environ.get("REPORT_EXPORT_DIR", VAR_DIR / "exports"))
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-platform@localhost")
PLATFORM_NAME = os.environ.get("PLATFORM_NAME", "GPU Platform")  # the provider named on invoices and exports
PLATFORM_REGION = os.environ.get("PLATFORM_REGION", "local")  # FOCUS RegionId of this cluster
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))

# --- notifications (portal/notifications) ------------------------------------------------------
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))  # a mail server that hangs does not hold a worker
PORTAL_URL = os.environ.get("PORTAL_URL", "")  # e.g. https://gpu.example.org: absolute links in e-mails and webhooks
NOTIFY_STALE_AFTER_S = float(os.environ.get("NOTIFY_STALE_AFTER_S", "3600"))  # older job events are no news
WEBHOOK_TIMEOUT_S = float(os.environ.get("WEBHOOK_TIMEOUT_S", "10"))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
WEBHOOK_RETRY_BASE_S = float(os.environ.get("WEBHOOK_RETRY_BASE_S", "30"))  # then 60, 120, 240... between attempts
CELERY_BEAT_SCHEDULE["notifications-resend"] = {"task": "portal.notifications.tasks.resend_waiting_notifications",
                                                "schedule": 60.0}

# One line per request at INFO; heartbeats, polling and the beat's routine tasks at DEBUG (portal/logs.py)
LOGGING = logs.logging_config(os.environ.get("LOG_LEVEL", "INFO"))

# The operator dashboard's GPUs saved by the pool against silos: a replay of the last 30 days (portal/console/planner_services.py)
CELERY_BEAT_SCHEDULE["pool-savings"] = {"task": "portal.console.tasks.refresh_pool_savings",
                                        "schedule": float(os.environ.get("POOL_SAVINGS_INTERVAL_S", str(24 * 3600)))}
