"""Operator console: the queue tree editor and each queue's allocation history (staff only; thin views over
portal.console.services and portal.console.selectors)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext

from portal.console import selectors, services
from portal.console.services import ConsoleError
from portal.console.views import operator_required
from scheduling.forms import QueueByNameForm
from scheduling.models import Queue

HISTORY_DAYS = 7
# Short element ids: the pages' scripts and the browser tests find the fields by them
FIELD_IDS = {"name": "f-name", "parent": "f-parent", "deserved_gpus": "f-deserved", "over_quota_weight": "f-weight",
             "limit_gpus": "f-limit", "priority": "f-priority", "preemptible_only": "f-preemptible-only",
             "default_max_runtime_s": "f-default-max-runtime", "max_runtime_s": "f-max-runtime",
             "max_termination_grace_s": "f-max-grace"}


@operator_required
def queues(request):
    try:
        rows, error = selectors.queue_tree(), ""
    except ValueError as e:  # a tree the scheduler refuses: say so instead of failing the page
        rows, error = [], str(e)
    if request.GET.get("partial"):
        return render(request, "console/_queue_tree.html", {"rows": rows})
    return render(request, "console/queues.html", {"section": "queues", "rows": rows, "queue_error": error})


def _queue_form(queue: Queue | None, data=None, initial=None) -> QueueByNameForm:
    form = QueueByNameForm(data, instance=queue, initial=initial)
    if queue is not None:
        form.fields["parent"].queryset = Queue.objects.exclude(pk=queue.pk)
    form.fields["parent"].empty_label = gettext("(none: a root queue)")
    for name, element_id in FIELD_IDS.items():
        form.fields[name].widget.attrs["id"] = element_id
    return form


def _field_rows(form: QueueByNameForm, errors: dict[str, list[str]]) -> list[tuple]:
    """Each field with the service's messages for it, so every message sits beside its field."""
    return [(form[name], errors.get(name, [])) for name in form.fields]


@operator_required
def queue_edit(request, name=None):
    queue = get_object_or_404(Queue, name=name) if name else None
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        try:
            saved = services.save_queue(request.user, queue, request.POST)
        except ConsoleError as error:
            errors = error.errors
        else:
            messages.success(request, (gettext("Queue %(queue)s saved.") if queue else gettext("Queue %(queue)s created."))
                             % {"queue": saved.name})
            return redirect("console-queues")
        # the service's form changed `queue` in memory: show the refused values on a fresh copy
        queue = Queue.objects.get(pk=queue.pk) if queue else None
        form = _queue_form(queue, request.POST)
    else:
        form = _queue_form(queue, initial={"parent": request.GET.get("parent", "")} if queue is None else None)
    unplaced = {k: v for k, v in errors.items() if k not in form.fields}  # the whole form's messages
    return render(request, "console/queue_form.html", {
        "section": "queues", "queue": queue, "form": form, "field_rows": _field_rows(form, errors),
        "form_errors": [m for msgs in unplaced.values() for m in msgs],
    }, status=400 if errors else 200)


@operator_required
def queue_delete(request, name):
    """GET: what deleting would do, or why it is refused; POST: delete."""
    queue = get_object_or_404(Queue, name=name)
    errors: list[str] = []
    if request.method == "POST":
        try:
            services.delete_queue(request.user, queue)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("Queue %(queue)s deleted.") % {"queue": name})
            return redirect("console-queues")
    return render(request, "console/queue_delete.html", {
        "section": "queues", "queue": queue, "deletion": selectors.queue_deletion(queue), "errors": errors,
    }, status=400 if errors else 200)


@operator_required
def queue_history(request, name):
    """The queue's allocation against its deserved quota and fair share over the last 7 days."""
    queue = get_object_or_404(Queue, name=name)
    history = selectors.queue_allocation_history(queue, days=HISTORY_DAYS)
    chart = {
        "queue": queue.name,
        # wall times in the viewer's zone: plotly drops a time's UTC offset and would draw UTC
        "times": [None if t is None else timezone.localtime(t).strftime("%Y-%m-%d %H:%M:%S") for t in history.times],
        "allocated": history.allocated, "deserved": history.deserved, "fair_share": history.fair_share,
        "start": timezone.localtime(history.start).strftime("%Y-%m-%d %H:%M:%S"),
        "end": timezone.localtime(history.end).strftime("%Y-%m-%d %H:%M:%S"),
    }
    return render(request, "console/queue_history.html", {
        "section": "queues", "queue": queue, "history": history, "chart": chart, "days": HISTORY_DAYS,
        "interval_min": f"{settings.QUEUE_HISTORY_INTERVAL_S / 60:g}",
    })
