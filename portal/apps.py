from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Tenants"

    def ready(self):
        from portal.notebook_origin import check_cookie_domains, origin

        check_cookie_domains()  # the portal's cookies must never reach a notebook's host
        origin()  # a NOTEBOOK_ORIGIN that cannot be read stops the start
        from portal.api import schema  # noqa: F401 - registers the OpenAPI auth extension
        from portal.services import publish_job_events
        from scheduling.api import job_events_committed

        job_events_committed.connect(publish_job_events, dispatch_uid="portal-live-job-events")

        from billing.api import notice_raised
        from portal.notifications import receivers

        job_events_committed.connect(receivers.on_job_events, dispatch_uid="portal-notify-job-events")
        notice_raised.connect(receivers.on_billing_notice, dispatch_uid="portal-notify-billing-notices")

        from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

        from portal import invitations, login_backoff, user_sessions

        user_login_failed.connect(login_backoff.on_login_failed, dispatch_uid="portal-login-backoff-failed")
        user_logged_in.connect(login_backoff.on_logged_in, dispatch_uid="portal-login-backoff-success")
        user_logged_in.connect(user_sessions.on_logged_in, dispatch_uid="portal-user-sessions-in")
        user_logged_in.connect(invitations.on_logged_in, dispatch_uid="portal-invitations-in")
        user_logged_out.connect(user_sessions.on_logged_out, dispatch_uid="portal-user-sessions-out")

        from billing.api import use_ssh_provider
        from portal.ssh_access import ssh_bytes_by_job

        use_ssh_provider(ssh_bytes_by_job)  # SSH traffic keeps a notebook or job active (billing.idle)

        from portal.ssh_keys import public_keys_by_user
        from scheduling.api import use_key_reader

        use_key_reader(public_keys_by_user)  # a Kubernetes pod's SSH sidecar gets its submitter's keys

        from portal.identity import mfa

        mfa.connect()  # two-factor authentication's changes and recovery-code sign-ins to the audit log

        from portal import logs
        from portal.metrics import connect_celery_signals

        connect_celery_signals()
        logs.connect_celery_signals()   # a task sent from a request logs with the request's id
