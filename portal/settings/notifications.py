"""E-mail and webhooks (portal/notifications), and budget alerts' mail."""

import os

# default: one INFO log line per message, no mail server needed; set the SMTP backend to send for real
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "portal.notifications.log_backend.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-platform@localhost")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))  # a mail server that hangs does not hold a worker
PORTAL_URL = os.environ.get("PORTAL_URL", "")  # e.g. https://gpu.example.org: absolute links in e-mails and webhooks
NOTIFY_STALE_AFTER_S = float(os.environ.get("NOTIFY_STALE_AFTER_S", "3600"))  # older job events are no news
WEBHOOK_TIMEOUT_S = float(os.environ.get("WEBHOOK_TIMEOUT_S", "10"))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
WEBHOOK_RETRY_BASE_S = float(os.environ.get("WEBHOOK_RETRY_BASE_S", "30"))  # then 60, 120, 240... between attempts
