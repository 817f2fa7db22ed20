"""The one notification system: job events, budget alerts and idle notices reach each user by their
own choices (e-mail, in-app) and each workspace's webhook as signed JSON.

Sources: scheduling's `job_events_committed` (a job started, ended or failed) and billing's
`notice_raised` (budget alerts, idle notices), connected in `PortalConfig.ready` (`receivers`).
`services.notify` writes one `Notification` per recipient and one `WebhookDelivery` per webhook;
e-mails and webhook calls go out from Celery tasks (`tasks`), so a slow mail server or receiver never
holds up the scheduling cycle, and the beat sends again what never reached a worker.
"""
