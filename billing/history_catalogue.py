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
# The idle rule for any IDE (billing.idle.signals): which signals were quiet; a kept-alive notebook.
QUIET_SIGNALS = gettext_noop("quiet: %(signals)s")
QUIET_KERNEL = gettext_noop("no kernel activity")
QUIET_SSH = gettext_noop("SSH traffic %(bytes)s B (below %(threshold)s B per window)")
QUIET_GPU = gettext_noop("GPU use below %(threshold)s %%")
QUIET_CPU = gettext_noop("CPU %(percent)s %% (at most %(threshold)s %%)")
QUIET_CPU_UNMEASURED = gettext_noop("CPU not measured")
KEEP_ALIVE_SET = gettext_noop("kept alive until %(until)s by %(user)s: the idle rule skips it until then")
KEEP_ALIVE_CLEARED = gettext_noop("keep-alive cleared by %(user)s: the idle rule applies again")

# Budgets (billing.reports.services).
BUDGET_SPENT = gettext_noop("its workspace spent %(percent)s %% of its budget")
ACCOUNT_BUDGET_SPENT = gettext_noop("its billing account %(account)s spent %(percent)s %% of its budget")
CREDIT_SPENT = gettext_noop("its billing account %(account)s has no prepaid credit left")
