"""The portal's stored sentences, each written once: the console's audit messages, the job events it
writes, and the notifications' subjects and bodies, stored as msgid and figures
(scheduling.history_texts) and rendered in the reader's language when read. A msgid here is stored in
rows: reword one only with a data migration."""

from django.utils.translation import gettext_noop

# The console's audit messages: nodes, tokens, queues, prices, currencies, users, jobs (portal.console).
ON_SELECTED = gettext_noop("%(action)s on %(count)s selected: %(names)s")
NODE_NOT_READY = gettext_noop("NotReady: its agent has not reported for %(seconds)s s (last heartbeat "
                              "%(heartbeat)s); its replicas are evicted (node-lost)")
NODE_READY_AGAIN = gettext_noop("Ready again: its agent reports")
NODE_DRAINED = gettext_noop("evicted %(moves)s preemptible replicas of jobs %(jobs)s; %(stays)s non-preemptible "
                            "replicas finish in place")
NONE = gettext_noop("none")
TOKEN_CREATED = gettext_noop("agent token %(hint)s… for node %(node)s")
TOKEN_REVOKED = gettext_noop("agent token %(hint)s… of node %(node)s")
QUEUE_DELETED = gettext_noop("workspaces that lost it: %(workspaces)s")
PRICE_TABLE_WITHDRAWN = gettext_noop("withdrew %(table)s, which was to take effect %(when)s UTC")
CURRENCY_SET = gettext_noop("%(workspace)s is billed in %(currency)s from %(since)s (was %(before)s)")
WHOLE_HISTORY = gettext_noop("its whole history")
PASSWORD_RESET = gettext_noop("password of %(user)s reset")
SESSIONS_ENDED = gettext_noop("ended %(count)s sessions of %(user)s")
ANONYMISED = gettext_noop("%(user)s anonymised: name and e-mail replaced, account deactivated, %(sessions)s "
                          "sessions and %(tokens)s API tokens ended")
FOR_REASON = gettext_noop("reason: %(reason)s")
ADJUSTED_JOB = gettext_noop("job #%(job)s")
ADJUSTED = gettext_noop("%(category)s %(cost)s %(currency)s for %(workspace)s, %(target)s: %(reason)s")
WORKSPACE_ACCOUNT_SET = gettext_noop("%(workspace)s is paid for by %(account)s (was %(before)s)")
ACCOUNT_TOPPED_UP = gettext_noop("prepaid credit of %(account)s topped up by %(amount)s %(currency)s: %(note)s")
ADJUSTED_FROM_REPORT = gettext_noop("%(category)s %(cost)s %(currency)s for %(workspace)s: %(reason)s")

# A job's events written by the console when a node is drained (portal.console.services).
DRAIN_SHRUNK = (gettext_noop("%(count)s replica evicted: node %(node)s is drained"),
                gettext_noop("%(count)s replicas evicted: node %(node)s is drained"))
DRAIN_EVICTED = gettext_noop("evicted: node %(node)s is drained")

# A waiting job the scheduler has not looked at yet (portal.console.selectors).
NOT_LOOKED_AT = gettext_noop("waiting for its first scheduling cycle")

# Notifications: a job's mail subject and body by event, and a webhook's audit (portal.notifications).
STARTED_SUBJECT = gettext_noop("%(name)s (#%(job)s) started: %(state)s")
STARTED_BODY = gettext_noop("Job %(name)s (#%(job)s) in workspace %(workspace)s started at %(time)s: %(state)s.")
ENDED_SUBJECT = gettext_noop("%(name)s (#%(job)s) ended: %(state)s")
ENDED_BODY = gettext_noop("Job %(name)s (#%(job)s) in workspace %(workspace)s ended at %(time)s: %(state)s.")
FAILED_SUBJECT = gettext_noop("%(name)s (#%(job)s) failed: %(state)s")
FAILED_BODY = gettext_noop("Job %(name)s (#%(job)s) in workspace %(workspace)s failed at %(time)s: %(state)s.")
DEADLINE_SUBJECT = gettext_noop("%(name)s (#%(job)s) can no longer finish by its deadline")
DEADLINE_BODY = gettext_noop("Job %(name)s (#%(job)s) in workspace %(workspace)s can no longer finish by its deadline "
                             "(found at %(time)s).")
NEW_SIGNING_SECRET = gettext_noop("new signing secret")
