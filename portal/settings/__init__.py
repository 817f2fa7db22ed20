"""Settings from environment variables, with defaults that run the embedded stack; one module per concern.

Embedded default: SQLite under var/ and a Redis the project starts on a unix socket under var/.
Production: set DATABASE_URL and REDIS_URL; nothing else changes. DJANGO_SETTINGS_MODULE stays
`portal.settings`; a settings module of one's own can import this one and change what it needs.
"""

from portal.settings.accounting import *  # noqa: F403 - usage, the ledger, the billing currency, reports
from portal.settings.base import *  # noqa: F403 - apps, middleware, templates, i18n, static, REST API
from portal.settings.celery import *  # noqa: F403
from portal.settings.database import *  # noqa: F403
from portal.settings.env import *  # noqa: F403 - BASE_DIR, VAR_DIR, DEBUG
from portal.settings.identity import *  # noqa: F403 - company sign-in (OIDC), local sign-in on or off
from portal.settings.ldap import *  # noqa: F403 - sign-in against an LDAP directory (off unless LDAP_AUTH_URL)
from portal.settings.logging import *  # noqa: F403
from portal.settings.notifications import *  # noqa: F403 - e-mail and webhooks
from portal.settings.redis import *  # noqa: F403 - Redis, the Channels layer, the cache
from portal.settings.scheduler import *  # noqa: F403 - the scheduler, the simulated cluster, job logs
from portal.settings.security import *  # noqa: F403 - secrets, hosts, sign-in, HTTPS, headers, rate limits
