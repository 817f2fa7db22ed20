"""Writing the audit log: the console's services call `record`; the Django admin is hooked here.

Admin forms already write a LogEntry for every add, change and delete; a signal copies each into
the audit log. Admin actions (revoke tokens, lose nodes...) write no LogEntry, so every registered
ModelAdmin's `response_action` is wrapped to record the action it carried out.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.db.models import Model
from django.db.models.signals import post_save
from django.http import HttpResponseRedirect
from django.utils import translation

from portal import history_catalogue as texts
from portal.console.models import AuditEntry
from scheduling.api import AdminMessage, Worded, history_texts, said

ADMIN_ACTIONS = {ADDITION: "create", CHANGE: "change", DELETION: "delete"}


def _plain(value: Any) -> Any:
    """A JSON-safe form of a field value (Decimal and dates as text, model instances by name)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return format(value.normalize(), "f") if value == value.to_integral() else str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def snapshot(obj: Model, fields: Iterable[str]) -> dict[str, Any]:
    return {name: _plain(getattr(obj, name)) for name in fields}


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list]:
    """field: [old, new] for every field whose value changed."""
    return {k: [before.get(k), after[k]] for k in after if before.get(k) != after[k]}


def target_type(obj_or_model) -> str:
    meta = obj_or_model._meta
    return f"{meta.app_label}.{meta.model_name}"


def record(user, action: str, target: Model | None = None, *, changes: dict | None = None, message: Any = "",
           source: str = AuditEntry.Source.CONSOLE, target_type_name: str = "", target_id: str = "",
           target_repr: str = "") -> AuditEntry:
    """One audit entry: who (user), what (action on target, with field changes), when (now). `message` is
    plain text or a history_texts value (stored in English and as said, rendered in the reader's language)."""
    if target is not None:
        target_type_name = target_type_name or target_type(target)
        target_id = target_id or str(target.pk)
        target_repr = target_repr or str(target)
    return AuditEntry.objects.create(
        user=user if getattr(user, "pk", None) else None, username=getattr(user, "username", "") or "system",
        source=source, action=action, target_type=target_type_name, target_id=target_id,
        target_repr=target_repr[:200], changes=_plain(changes or {}),
        message=message if isinstance(message, str) else history_texts.english(message),
        said=history_texts.stored(message),
    )


def record_failed_login(user, username: str, address: str, path: str, *, refused: bool) -> AuditEntry:
    """A failed sign-in as `username` (the matching user, if any) from `address`. Never the password:
    the caller passes none. `refused`: tried within the account's back-off, the password unread."""
    why = "refused during back-off" if refused else "wrong username or password"
    return AuditEntry.objects.create(
        user=user, username=username[:150], source=AuditEntry.Source.SIGN_IN, action="login failed",
        target_type="auth.user", target_id=str(user.pk) if user else "", target_repr=username[:200],
        message=f"failed sign-in on {path} from {address}: {why}"[:1000])


def _from_log_entry(sender, instance: LogEntry, created: bool, **kwargs) -> None:
    if not created:
        return
    ct = instance.content_type
    record(instance.user, ADMIN_ACTIONS.get(instance.action_flag, "change"), source=AuditEntry.Source.ADMIN,
           target_type_name=f"{ct.app_label}.{ct.model}" if ct else "", target_id=instance.object_id or "",
           target_repr=instance.object_repr, message=_admin_message(instance))


def _admin_message(entry: LogEntry) -> Any:
    """Django's own change message (a JSON list it words in the active language), kept as such."""
    with translation.override("en"):
        text = entry.get_change_message() or ""
    return Worded(text, AdminMessage(entry.change_message)) if entry.change_message.startswith("[") else text


def _audited_response_action(model_admin):
    original = model_admin.response_action

    def response_action(request, queryset):
        from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

        action = request.POST.get("action", "")
        selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
        names = [str(o) for o in model_admin.model._default_manager.filter(pk__in=selected)]  # before a delete
        response = original(request, queryset)
        done = isinstance(response, HttpResponseRedirect) and selected and action
        # delete_selected logs one deletion through LogEntry.save() (the signal above records it), but
        # several at once through bulk_create, which sends no signal: those are recorded here.
        if done and (action != "delete_selected" or len(selected) > 1):
            record(request.user, "delete" if action == "delete_selected" else f"admin action: {action}"[:32],
                   source=AuditEntry.Source.ADMIN, target_type_name=target_type(model_admin.model),
                   target_id=",".join(selected)[:64], target_repr=", ".join(names)[:200],
                   message=said(texts.ON_SELECTED, action=action,
                                count=len(selected), names=", ".join(names)))
        return response

    return response_action


def connect_admin_hooks() -> None:
    from django.contrib import admin

    post_save.connect(_from_log_entry, sender=LogEntry, dispatch_uid="console-audit-log-entry")
    for model_admin in admin.site._registry.values():
        if not getattr(model_admin, "_audited", False):
            model_admin.response_action = _audited_response_action(model_admin)
            model_admin._audited = True
