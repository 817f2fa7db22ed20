"""The capacity planner (staff only): replay the platform's own history, or an uploaded trace, on the actual
cluster and on one the operator edits, and compare waits, utilisation, GPU-hours and cost. Thin views over
planner_forms and planner_services; the replays run in Celery (portal/console/tasks.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from portal.console import planner_services as services
from portal.console.models import PlannerRun
from portal.console.planner_forms import PlannerForm
from portal.console.services import ConsoleError
from portal.console.views import operator_required
from scheduling.api import cluster_snapshot

RECENT_RUNS = 12


def _runs():
    recent = list(PlannerRun.objects.exclude(kind=PlannerRun.Kind.SAVINGS)[:RECENT_RUNS])
    saved = list(PlannerRun.objects.filter(saved=True).exclude(pk__in=[r.pk for r in recent]))
    return recent + saved


@operator_required
def planner(request):
    cluster = cluster_snapshot()
    if request.method == "POST":
        form = PlannerForm(request.POST, request.FILES, cluster=cluster)
        if form.is_valid():
            trace = bool(form.cleaned_data.get("trace"))
            run = services.start_run(request.user, kind=PlannerRun.Kind.TRACE if trace else PlannerRun.Kind.WHATIF,
                                     inputs=form.inputs(), trace_csv=form.trace_text)
            return redirect("console-planner-run", pk=run.pk)
    else:
        form = PlannerForm(cluster=cluster)
    return render(request, "console/planner.html", {
        "section": "planner", "form": form, "runs": _runs(), "savings": services.latest_savings(),
    }, status=400 if form.is_bound else 200)


def _chart_data(run: PlannerRun) -> dict:
    """What the page's charts draw: the waits per queue (quantiles, minutes) and the GPUs allocated over time,
    actual against edited, times in the viewer's zone (plotly would draw a UTC offset as UTC)."""
    results = run.results or {}
    out = {"waits": {}, "allocation": {}}
    for side in ("actual", "edited"):
        figures = results.get(side)
        if not figures:
            continue
        out["waits"][side] = {q: f["wait_quantiles_min"] for q, f in figures["queues"].items()}
        alloc = figures["allocation"]
        times = [timezone.localtime(datetime.fromtimestamp(alloc["start"] + (i + 0.5) * alloc["step_s"], tz=UTC))
                 .strftime("%Y-%m-%d %H:%M") for i in range(len(alloc["gpus"]))]
        out["allocation"][side] = {"times": times, "gpus": alloc["gpus"], "capacity": figures["total"]["gpus"]}
    return out


def _rows(run: PlannerRun) -> tuple[list, list]:
    """Per queue and per pool, the actual figures beside the edited ones."""
    results = run.results or {}
    actual, edited = results.get("actual", {}), results.get("edited", {})
    queues = sorted(set(actual.get("queues", {})) | set(edited.get("queues", {})))
    pools = sorted(set(actual.get("pools", {})) | set(edited.get("pools", {})))
    return ([(q, actual.get("queues", {}).get(q), edited.get("queues", {}).get(q)) for q in queues],
            [(p, actual.get("pools", {}).get(p), edited.get("pools", {}).get(p)) for p in pools])


@operator_required
def planner_run(request, pk: int):
    run = get_object_or_404(PlannerRun, pk=pk)
    results = run.results or {}
    # the three figures of the replays' target per side (runs stored before them have none: left out)
    target_rows = [(side, {k: results[side]["total"][k] for k in services.TARGET_FIGURES})
                   for side in ("actual", "edited") if "strict_wait_p95_s" in results.get(side, {}).get("total", {})]
    if request.GET.get("partial") == "status":
        status = {"state": run.state, "progress": run.progress, "error": run.error}
        if target_rows:
            status["targets"] = dict(target_rows)
        return JsonResponse(status)
    queue_rows, pool_rows = _rows(run)
    return render(request, "console/planner_run.html", {
        "section": "planner", "run": run, "results": results, "queue_rows": queue_rows,
        "pool_rows": pool_rows, "charts": _chart_data(run) if run.state == PlannerRun.State.DONE else {},
        "target_rows": target_rows,
    })


@operator_required
@require_POST
def planner_save(request, pk: int):
    run = get_object_or_404(PlannerRun, pk=pk)
    name = request.POST.get("name", "").strip()
    if not name or len(name) > 120:
        raise ConsoleError(gettext("give the saved result a name of 1 to 120 characters"), field="name")
    if run.state != PlannerRun.State.DONE:
        raise ConsoleError(gettext("only a finished replay can be saved"))
    PlannerRun.objects.filter(pk=run.pk).update(saved=True, name=name)
    return redirect("console-planner-run", pk=run.pk)


@operator_required
@require_POST
def planner_cancel(request, pk: int):
    """Stop a queued or running replay (planner_services.cancel_run); the page then says it was cancelled."""
    run = get_object_or_404(PlannerRun, pk=pk)
    if not services.cancel_run(request.user, run):
        raise ConsoleError(gettext("only a queued or running replay can be cancelled"))
    return redirect("console-planner-run", pk=run.pk)


@operator_required
def planner_compare(request):
    """Two finished runs side by side: their edited clusters' figures (the actual cluster's are the same for
    runs of the same window)."""
    ids = [request.GET.get("a", ""), request.GET.get("b", "")]
    if not all(i.isdigit() and len(i) < 12 for i in ids):
        raise ConsoleError(gettext("choose two replays to compare (a= and b=, their numbers)"))
    runs = {r.pk: r for r in PlannerRun.objects.filter(pk__in=[int(i) for i in ids], state=PlannerRun.State.DONE)
            .exclude(kind=PlannerRun.Kind.SAVINGS)}
    try:
        a, b = runs[int(ids[0])], runs[int(ids[1])]
    except KeyError:
        raise Http404(gettext("No such finished replay")) from None
    queues = sorted(set(a.results["edited"]["queues"]) | set(b.results["edited"]["queues"]))
    rows = [(q, a.results["edited"]["queues"].get(q), b.results["edited"]["queues"].get(q)) for q in queues]
    return render(request, "console/planner_compare.html", {"section": "planner", "a": a, "b": b, "rows": rows,
                                                            "choices": PlannerRun.objects.filter(saved=True)})


@operator_required
@require_POST
def planner_savings(request):
    """Replay the last 30 days for the dashboard's pool-against-silos figure now (in Celery)."""
    run = services.start_run(request.user, kind=PlannerRun.Kind.SAVINGS, inputs={"days": 30})
    return redirect("console-planner-run", pk=run.pk)
