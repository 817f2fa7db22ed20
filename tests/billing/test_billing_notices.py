"""Billing tells people things through `notice_raised`; the portal takes each notice over. Without a
receiver (billing on its own) the recipients are e-mailed as before."""

from django.core import mail

from billing.notices import Notice, notice_raised, raise_notice
from portal.models import Notification
from portal.notifications.receivers import on_billing_notice


def notice(tenants):
    return Notice(event="budget.alert", workspace=tenants.vision, users=(tenants.alice, tenants.finance),
                  subject="spent", body="80 %")


def test_the_portal_takes_the_notice_over(tenants):
    raise_notice(notice(tenants))
    assert {n.user.username for n in Notification.objects.all()} == {"alice", "finance"}
    (message,) = mail.outbox
    assert sorted(message.to) == ["alice@example.com", "finance@example.com"]


def test_without_a_receiver_billing_e_mails_the_recipients_itself(tenants):
    notice_raised.disconnect(dispatch_uid="portal-notify-billing-notices")
    try:
        raise_notice(notice(tenants))
    finally:
        notice_raised.connect(on_billing_notice, dispatch_uid="portal-notify-billing-notices")
    (message,) = mail.outbox
    assert (message.subject, sorted(message.to)) == ("[GPU Platform] spent", ["alice@example.com", "finance@example.com"])
    assert not Notification.objects.exists()
