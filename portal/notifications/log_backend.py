"""E-mail backend for development and for platforms without a mail server: one INFO line per message
(recipients, subject, Message-ID) on `portal.mail`, never the body (it may carry links with tokens).
Django's console backend printed whole messages to stdout, which a Celery worker logs line by line as
WARNINGs."""

from __future__ import annotations

import logging

from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.message import make_msgid

log = logging.getLogger("portal.mail")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:200]


class EmailBackend(BaseEmailBackend):
    def send_messages(self, email_messages) -> int:
        sent = 0
        for message in email_messages or ():
            if "Message-ID" not in message.extra_headers:
                message.extra_headers["Message-ID"] = make_msgid()
            log.info("e-mail to %s subject %r message-id %s", ", ".join(_one_line(r) for r in message.recipients()),
                     _one_line(message.subject), message.extra_headers["Message-ID"])
            sent += 1
        return sent
