"""Billing's history sentences, each written once: the reasons of the job events and notices it writes
(idle GPUs, budgets), stored as msgid and figures (scheduling.history_texts) and rendered in the reader's
language when read. A msgid here is stored in rows: reword one only with a data migration."""

from django.utils.translation import gettext_noop

# Idle GPUs: the notice before a stop and the stop itself (billing.idle.services).
IDLE_WHERE = gettext_noop("%(replica)s on %(node)s (%(slice)s)")
NOTEBOOK_IDLE_STOPPED = gettext_noop("Notebook idle: no kernel activity and no GPU use on %(where)s for %(minutes)s "
                                     "min; it is stopped now (its slice is freed, its home kept: start it again at "
                                     "will)")
NOTEBOOK_IDLE_NOTICE = gettext_noop("Notebook idle: no kernel activity and no GPU use on %(where)s for %(minutes)s "
                                    "min; it will be stopped at %(stop)s unless it gets busy")
SLICE_IDLE_NOTICE = gettext_noop("GPU slice idle: %(where)s below %(threshold)s %% utilisation for %(window)s min "
                                 "(pool %(pool)s); the job will be stopped at %(stop)s unless it gets busy")
SLICE_IDLE = gettext_noop("GPU slice idle: %(where)s below %(threshold)s %% utilisation for %(window)s min (pool "
                          "%(pool)s)")
NOTEBOOK_IDLE_STOP_REASON = gettext_noop("no kernel activity and no GPU use for %(minutes)s min (its idle policy); "
                                         "start it again at will")
SLICE_IDLE_STOP_REASON = gettext_noop("its GPUs stayed below %(threshold)s %% for %(window)s min and %(grace)s min "
                                      "after notice (pool %(pool)s's idle policy)")

# Budgets (billing.reports.services).
BUDGET_SPENT = gettext_noop("its workspace spent %(percent)s %% of its budget")
