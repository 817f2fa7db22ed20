import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect(weak=False)
def platform_logging(**_):
    """Workers and beat log through the platform's LOGGING (one format; a task sent from a request shows that
    request's id), not through the handler Celery would put on the root logger."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
