"""People leave, records stay: a departed person's name and e-mail give way to a pseudonym wherever the
platform shows or exports them, while every id and sum is kept.

Pages, the API and the ledger's exports render a job's submitter from the user row (the jobs list and
page, the FOCUS export's x_Submitter, reports grouped by user), so renaming the user is enough there, and
billed lines and closed periods are never rewritten (`ChargeLine.submitter` keeps the name it was written
with, and is no longer shown). Texts that were written with the name in them and are not billed records
are rewritten: job events' reasons and figures, the audit log's entries, who last changed a workspace
secret and who added a bucket. The account is deactivated and its password made unusable, its sessions
and API tokens end, and the audit log records who did it and when, under the pseudonym alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.utils.translation import gettext

from portal import history_catalogue as texts
from portal import user_sessions
from portal.console import audit
from portal.console.models import AuditEntry
from portal.console.services import ConsoleError
from portal.models import ApiToken, LoginBackoff
from scheduling.api import clock, history_texts, said
from scheduling.models import JobEvent, RegistryCredential, WorkspaceBucket, WorkspaceSecret

PSEUDONYM = "former-user-{id}"
# what may stand next to a name inside a word of a username or an address
NAME_CHARS = r"\w.@+-"


@dataclass(frozen=True)
class Anonymised:
    user: Any
    pseudonym: str
    changed: bool  # False: it was already done, nothing was written
    sessions: int = 0
    tokens: int = 0
    events: int = 0
    audit_entries: int = 0


def pseudonym(user) -> str:
    return PSEUDONYM.format(id=user.pk)


def is_anonymised(user) -> bool:
    return (user.username == pseudonym(user) and not user.email and not user.first_name and not user.last_name
            and not user.is_active)


def refusal(actor, user, *, force: bool = False) -> str | None:
    """Why this user may not be anonymised by `actor` (None: they may)."""
    if actor is not None and getattr(actor, "pk", None) == user.pk:
        return gettext("you cannot anonymise your own account")
    if (user.is_staff or user.is_superuser) and not force and not is_anonymised(user):
        return gettext("%(user)s is an operator: confirm that operators are anonymised too") % {"user": user.username}
    return None


class _Names:
    """Replaces each old name (a username or an e-mail) with the pseudonym, as a whole word only."""

    def __init__(self, old: list[str], new: str):
        self.old = [name for name in old if name]
        self.new = new
        alternatives = "|".join(re.escape(name) for name in sorted(self.old, key=len, reverse=True))
        self.pattern = re.compile(rf"(?<![{NAME_CHARS}])(?:{alternatives})(?![\w@+-])")

    def text(self, value: str) -> str:
        return self.pattern.sub(lambda _: self.new, value) if value else value

    def plain(self, value: Any) -> Any:
        """Values in a JSON structure (its keys are names of fields, kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        if isinstance(value, dict):
            return {k: self.plain(v) for k, v in value.items()}
        return value

    def said(self, value: Any) -> Any:
        """A stored history_texts value: its figures and items, never its msgid or code."""
        if isinstance(value, dict):
            if "p" in value:
                return {**value, "p": {k: self.said(v) for k, v in (value["p"] or {}).items()}}
            if "i" in value:
                return {**value, "i": [self.said(v) for v in value["i"]]}
            if "admin" in value:
                return {**value, "admin": self.text(value["admin"])}
            return value
        return self.plain(value)

    def english(self, stored: Any, written: str) -> str:
        """The English text again from the rewritten value, else the written text with names replaced."""
        if stored:
            try:
                return history_texts.english(stored)
            except (history_texts.Unreadable, KeyError, TypeError, ValueError, AttributeError, IndexError):
                pass
        return self.text(written)

    def mentioned(self, *fields: str) -> Q:
        """Rows whose fields (text, or JSON cast to text as `<field>_text`) might name someone: a superset,
        narrowed by the whole-word rewrite."""
        query = Q()
        for name in self.old:
            for form in {name, json.dumps(name)[1:-1]}:  # JSON may store non-ASCII escaped
                for field in fields:
                    query |= Q(**{f"{field}__contains": form})
        return query


def _rewrite_events(names: _Names) -> int:
    rows = JobEvent.objects.annotate(said_text=Cast("said", TextField()), data_text=Cast("data", TextField())) \
        .filter(names.mentioned("reason", "said_text", "data_text"))
    changed = []
    for event in rows.iterator():
        stored, data = names.said(event.said), names.plain(event.data)
        reason = names.english(stored, event.reason)
        if (stored, data, reason) != (event.said, event.data, event.reason):
            event.said, event.data, event.reason = stored, data, reason
            changed.append(event)
    JobEvent.objects.bulk_update(changed, ["said", "data", "reason"], batch_size=500)
    return len(changed)


def _rewrite_audit(user, names: _Names) -> int:
    rows = AuditEntry.objects.annotate(said_text=Cast("said", TextField()), changes_text=Cast("changes", TextField())) \
        .filter(Q(user=user) | Q(target_type="auth.user", target_id=str(user.pk)) | Q(username__in=names.old)
                | names.mentioned("target_repr", "message", "said_text", "changes_text"))
    changed = []
    for entry in rows.iterator():
        stored, changes = names.said(entry.said), names.plain(entry.changes)
        message = names.english(stored, entry.message)
        username = names.new if entry.user_id == user.pk else names.text(entry.username)
        target_repr = (names.new if entry.target_type == "auth.user" and entry.target_id == str(user.pk)
                       else names.text(entry.target_repr))
        after = (stored, changes, message, username, target_repr)
        if after != (entry.said, entry.changes, entry.message, entry.username, entry.target_repr):
            entry.said, entry.changes, entry.message, entry.username, entry.target_repr = after
            changed.append(entry)
    AuditEntry.objects.bulk_update(changed, ["said", "changes", "message", "username", "target_repr"], batch_size=500)
    return len(changed)


@transaction.atomic
def anonymise_user(actor, user, *, force: bool = False) -> Anonymised:
    """Replace the user's name and e-mail with a pseudonym everywhere they are shown or exported, deactivate
    the account and end its sessions and API tokens; audited. Doing it again changes nothing."""
    User = get_user_model()
    user = User.objects.select_for_update().get(pk=user.pk)
    if problem := refusal(actor, user, force=force):
        raise ConsoleError({"": [problem]})
    new = pseudonym(user)
    if is_anonymised(user) and not user.user_sessions.exists() \
            and not user.api_tokens.filter(revoked__isnull=True).exists():
        return Anonymised(user, new, changed=False)
    if User.objects.filter(username__iexact=new).exclude(pk=user.pk).exists():
        raise ConsoleError({"": [gettext("another account is named %(name)s") % {"name": new}]})
    old = [user.username, user.email] if user.username != new else [user.email]
    names = _Names([n for n in old if n and n != new], new)
    events = audit_entries = 0
    if names.old:
        events = _rewrite_events(names)
        audit_entries = _rewrite_audit(user, names)
        for model in (WorkspaceSecret, RegistryCredential):
            model.objects.filter(changed_by=user).update(changed_by_name=new)
        WorkspaceBucket.objects.filter(created_by_name__in=names.old).update(created_by_name=new)
        LoginBackoff.objects.filter(username__in=names.old).delete()
    user.username, user.email, user.first_name, user.last_name, user.is_active = new, "", "", "", False
    user.set_unusable_password()
    user.save(update_fields=["username", "email", "first_name", "last_name", "is_active", "password"])
    sessions = user_sessions.end_all(user)
    tokens = ApiToken.objects.filter(user=user, revoked__isnull=True).update(revoked=clock.now())
    audit.record(actor, "anonymise", user, target_repr=new,
                 message=said(texts.ANONYMISED, user=new, sessions=sessions, tokens=tokens))
    return Anonymised(user, new, changed=True, sessions=sessions, tokens=tokens, events=events,
                      audit_entries=audit_entries)
