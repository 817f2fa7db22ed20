"""Celery: the broker and results on the project's Redis, and the beat's schedule."""

import os

from portal import redis_urls
from portal.settings.env import VAR_DIR, env_bool
from portal.settings.redis import REDIS_URL
from portal.settings.scheduler import (
    FIRST_FORECAST_INTERVAL_S,
    IDLE_CHECK_INTERVAL_S,
    QUEUE_HISTORY_INTERVAL_S,
    SCHEDULER_INTERVAL_S,
)

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
CELERY_IMPORTS = ("billing.reports.tasks", "portal.notifications.tasks")  # not apps' tasks.py: autodiscovery misses them

# Long tasks (planner and savings replays, Excel exports) run on a queue of their own with a worker of their
# own (`worker-long` under `make run`, the chart's long worker), so they never hold up the scheduling cycle on
# the default queue. Each is stopped after LONG_TASK_TIME_LIMIT_S: softly a little before (an exception the
# task records as its failure), then for good (the worker kills its child).
CELERY_LONG_QUEUE = "long"
LONG_TASKS = ("portal.console.tasks.run_planner", "portal.console.tasks.refresh_pool_savings",
              "billing.reports.tasks.build_excel_export", "scheduling.tasks.keep_first_forecasts")
LONG_TASK_TIME_LIMIT_S = float(os.environ.get("LONG_TASK_TIME_LIMIT_S", "1800"))
LONG_TASK_CONCURRENCY = int(os.environ.get("LONG_TASK_CONCURRENCY", "2"))
CELERY_TASK_ROUTES = {name: {"queue": CELERY_LONG_QUEUE} for name in LONG_TASKS}
CELERY_TASK_ANNOTATIONS = {name: {"time_limit": LONG_TASK_TIME_LIMIT_S,
                                  "soft_time_limit": LONG_TASK_TIME_LIMIT_S - min(60.0, LONG_TASK_TIME_LIMIT_S / 10)} for name in LONG_TASKS}

CELERY_BEAT_SCHEDULE = {
    "scheduling-cycle": {"task": "scheduling.tasks.scheduling_cycle", "schedule": SCHEDULER_INTERVAL_S},
    # pending jobs' first expected starts, which the forecast's calibration learns from (a replay: the long queue)
    "first-forecasts": {"task": "scheduling.tasks.keep_first_forecasts", "schedule": FIRST_FORECAST_INTERVAL_S},
    "queue-history": {"task": "portal.tasks.sample_queue_allocation", "schedule": QUEUE_HISTORY_INTERVAL_S},
    "queue-history-retention": {"task": "portal.tasks.purge_queue_allocation_history", "schedule": 6 * 3600.0},
    "job-log-retention": {"task": "scheduling.tasks.purge_old_job_logs", "schedule": 6 * 3600.0},
    "ledger-post": {"task": "billing.tasks.post_usage", "schedule": float(os.environ.get("LEDGER_POST_INTERVAL_S", "30"))},
    "export-resend": {"task": "billing.tasks.resend_waiting_exports", "schedule": 60.0},
    "usage-retention": {"task": "billing.tasks.purge_old_samples", "schedule": 6 * 3600.0},
    "idle-gpus": {"task": "billing.tasks.check_idle_gpus", "schedule": IDLE_CHECK_INTERVAL_S},
    # the runs of the workspaces' schedules (a cron line fires at most once a minute)
    "schedules": {"task": "billing.tasks.fire_schedules", "schedule": 20.0},
    **({"demo-load": {"task": "portal.tasks.demo_load", "schedule": float(os.environ.get("DEMO_LOAD_INTERVAL_S", "20"))}}
       if env_bool("DEMO_LOAD", False) else {}),
    "notifications-resend": {"task": "portal.notifications.tasks.resend_waiting_notifications", "schedule": 60.0},
    # The operator dashboard's GPUs saved by the pool against silos: a replay of the last 30 days
    # (portal/console/planner_services.py)
    "pool-savings": {"task": "portal.console.tasks.refresh_pool_savings",
                     "schedule": float(os.environ.get("POOL_SAVINGS_INTERVAL_S", str(24 * 3600)))},
}
