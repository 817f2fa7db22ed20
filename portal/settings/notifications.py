"""E-mail and webhooks (portal/notifications), and budget alerts' mail."""

import os

from portal.settings.env import env_list

# default: one INFO log line per message, no mail server needed; set the SMTP backend to send for real
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "portal.notifications.log_backend.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "gpu-platform@localhost")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))  # a mail server that hangs does not hold a worker
PORTAL_URL = os.environ.get("PORTAL_URL", "")  # e.g. https://gpu.example.org: absolute links in e-mails and webhooks
NOTIFY_STALE_AFTER_S = float(os.environ.get("NOTIFY_STALE_AFTER_S", "3600"))  # older job events are no news
WEBHOOK_TIMEOUT_S = float(os.environ.get("WEBHOOK_TIMEOUT_S", "5"))  # at most 5: the outbound client's own limit
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
WEBHOOK_RETRY_BASE_S = float(os.environ.get("WEBHOOK_RETRY_BASE_S", "30"))  # then 60, 120, 240... between attempts
# Private ranges webhooks may reach, for receivers on premises (e.g. "10.20.0.0/16,fd00:1::/64"); every other
# loopback, private, link-local or reserved address is refused (scheduling/outbound.py)
WEBHOOK_ALLOW_PRIVATE_CIDRS = env_list("WEBHOOK_ALLOW_PRIVATE_CIDRS", "")
# The same for the S3-compatible stores workspaces register as buckets (an on-premises MinIO, say)
BUCKET_ALLOW_PRIVATE_CIDRS = env_list("BUCKET_ALLOW_PRIVATE_CIDRS", "")
