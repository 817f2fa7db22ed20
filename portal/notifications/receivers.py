"""The sources of notifications, connected in PortalConfig.ready: scheduling's committed job events
and billing's notices. A receiver never raises: a notification that cannot be made is logged, and
the cycle, the budget check or the idle check that caused it goes on."""

from __future__ import annotations

import logging

from django.db import transaction

from portal.notifications import services
from scheduling.api import clock

log = logging.getLogger(__name__)


def on_job_events(sender, events, **kwargs) -> None:
    """scheduling's job_events_committed (after commit, once per cycle)."""
    try:
        with transaction.atomic():
            services.notify(services.job_notices(events, now=clock.now()))
    except Exception:
        log.exception("notifications of %d job events not made", len(events))


def on_billing_notice(sender, notice, **kwargs) -> bool:
    """billing's notice_raised: e-mailed at once, as billing always did, in-app and to the webhook."""
    try:
        with transaction.atomic():  # a failure here must not break the caller's transaction
            services.notify([notice], email_now=True)
    except Exception:
        log.exception("notice %r not delivered", notice.subject)
    return True
