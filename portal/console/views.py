"""Operator console pages (staff only): thin views over portal.console.services and portal.console.selectors."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from billing.api import MINOR_UNITS, between, currency_at, default_currency, price_currencies
from billing.forms import PriceTableForm
from billing.models import PRICE_FIELDS, NodeToken, PriceTable
from portal.console import audit, selectors, services
from portal.console.advice import BYTES_PER_PARAM, TASKS, part_name
from portal.console.models import AuditEntry
from portal.console.services import ConsoleError
from portal.models import Membership, Role, Workspace
from scheduling.api import DomainError, clock, cluster_view, storage
from scheduling.api import at_risk as deadlines_at_risk
from scheduling.forms import NewNodeForm, NewPoolForm, PoolPolicyForm
from scheduling.models import MIG_FAMILIES, Node, NodePool, Placement, PoolSharing, Queue

KNOWN_CURRENCIES = tuple(sorted(MINOR_UNITS))


def operator_required(view):
    """Staff only: anonymous users go to the login page, tenants get 403."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not request.user.is_staff:
            raise PermissionDenied(gettext("the operator console is for operators (staff) only"))
        return view(request, *args, **kwargs)

    return wrapped


# --------------------------------------------------------------------------- dashboard


def _live_context() -> dict:
    pools = cluster_view()
    try:
        queues, queue_error = selectors.queue_lines(), ""
    except ValueError as error:  # a tree the scheduler refuses: say so instead of failing the page
        queues, queue_error = [], str(error)
    return {
        "pools": pools, "heatmap": json.dumps(selectors.heatmap(pools)), "queues": queues,
        "queue_error": queue_error, "pending": selectors.pending_jobs(), "fragments": selectors.fragmentation_report(),
        "now": clock.now(),
    }


@operator_required
def dashboard(request):
    if request.GET.get("partial"):
        return render(request, "console/_live.html", _live_context())
    days = request.GET.get("days", "2")
    days = int(days) if days.isdigit() and 1 <= int(days) <= 31 else 2
    usage = selectors.usage_by_pool(days=days)
    usage_json = json.dumps([{"pool": u.pool, "hours": _chart_times(u.hours), "allocated": u.allocated,
                              "used": u.used} for u in usage])
    return render(request, "console/dashboard.html", {**_live_context(), "usage": usage, "usage_json": usage_json,
                                                      "days": days, "section": "dashboard",
                                                      "savings": selectors.platform_savings(),
                                                      "deadlines_at_risk": deadlines_at_risk(clock.now())})


def _chart_times(times) -> list[str]:
    """Wall times in the viewer's zone: plotly drops a time's UTC offset and would draw UTC."""
    return [timezone.localtime(t).strftime("%Y-%m-%d %H:%M") for t in times]


@operator_required
def advice(request):
    currencies = price_currencies()
    currency = request.GET.get("currency") or currencies[0]
    context = {"section": "advice", "tasks": TASKS, "precisions": list(BYTES_PER_PARAM), "currencies": currencies,
               "form": {"params_b": request.GET.get("params_b", ""), "task": request.GET.get("task", "inference"),
                        "precision": request.GET.get("precision", "fp16"), "currency": currency}}
    if currency not in currencies:
        context["error"] = gettext("currency: %(currency)s has no price table (%(known)s)") % {
            "currency": currency[:8], "known": ", ".join(currencies)}
        return render(request, "console/advice.html", context, status=400)
    if context["form"]["params_b"]:
        try:
            need, options, refused = selectors.gpu_advice(**context["form"])
            context.update(need=need, options=options, refused=refused, between=between(),
                           need_parts=[(part_name(what), gib) for what, gib in need.parts])
        except ValueError as error:
            context["error"] = str(error)
    return render(request, "console/advice.html", context)


# --------------------------------------------------------------------------- pools


def _warn_problems(request, pool: NodePool) -> None:
    """Say what leaves a just-saved pool out of quotes (no nodes yet, no price in some currency)."""
    for problem in selectors.pool_problem_texts().get(pool.name, []):
        messages.warning(request, gettext("Pool %(pool)s is not offered in quotes: %(why)s") % {
            "pool": pool.name, "why": problem["text"]})


@operator_required
def pools(request):
    errors = {}
    if request.method == "POST":
        try:
            pool = services.create_pool(request.user, request.POST)
            messages.success(request, gettext("Pool %(pool)s created; nodes join it when their agents report.") % {
                "pool": pool.name})
            _warn_problems(request, pool)
            return redirect("console-pools")
        except ConsoleError as error:
            errors = error.errors
    form = NewPoolForm(request.POST or None)
    pools = cluster_view()
    problems = selectors.pool_problem_texts()
    for p in pools:
        p["problems"] = problems.get(p["pool"].name, [])
    return render(request, "console/pools.html", {
        "section": "pools", "pools": pools, "placements": Placement.choices, "sharings": PoolSharing.choices,
        "field_rows": _field_rows(form, errors), "mig_families": MIG_FAMILIES,
        "form_errors": [m for f, msgs in errors.items() if f not in form.fields for m in msgs],
    }, status=400 if errors else 200)


@operator_required
def pool_delete(request, name):
    """GET: what deleting would do, or why it is refused; POST: delete."""
    pool = get_object_or_404(NodePool, name=name)
    errors: list[str] = []
    if request.method == "POST":
        try:
            services.delete_pool(request.user, pool)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("Pool %(pool)s deleted.") % {"pool": name})
            return redirect("console-pools")
    return render(request, "console/pool_delete.html", {
        "section": "pools", "pool": pool, "refusals": errors or services.pool_deletion_refusals(pool),
    }, status=400 if errors else 200)


POOL_FIELD_IDS = {"placement": "f-placement", "sharing": "f-sharing", "timeslice_replicas": "f-timeslice",
                  "mig_layout": "f-mig", "spot": "f-spot", "topology_levels": "f-topology",
                  "bucket_csi_driver": "f-bucket-csi"}


def _field_rows(form: forms.Form, errors: dict[str, list[str]]) -> list[tuple]:
    """Each field with the service's messages for it, so every message sits beside its field."""
    return [(form[name], errors.get(name, [])) for name in form.fields]


@operator_required
def pool_edit(request, name):
    pool = get_object_or_404(NodePool, name=name)
    errors = {}
    if request.method == "POST":
        try:
            services.save_pool(request.user, pool, request.POST)
            messages.success(request, gettext("Pool %(pool)s saved.") % {"pool": pool.name})
            _warn_problems(request, pool)
            return redirect("console-pools")
        except ConsoleError as error:
            errors = error.errors
    # the refused values on a fresh copy of the pool
    form = PoolPolicyForm(request.POST or None, instance=NodePool.objects.get(pk=pool.pk))
    for field, element_id in POOL_FIELD_IDS.items():
        form.fields[field].widget.attrs["id"] = element_id
    return render(request, "console/pool_form.html", {
        "section": "pools", "pool": pool, "field_rows": _field_rows(form, errors), "mig_families": MIG_FAMILIES,
        "problems": selectors.pool_problem_texts().get(pool.name, []),
        "form_errors": [m for f, msgs in errors.items() if f not in form.fields for m in msgs],
    }, status=400 if errors else 200)


# --------------------------------------------------------------------------- nodes


def _nodes_page(request, *, form=None, errors=None, new_token=None, status=200):
    if request.GET.get("partial"):
        return render(request, "console/_nodes.html", {"section": "nodes", "pools": selectors.nodes_view()})
    errors = errors or {}
    form = form or NewNodeForm()
    return render(request, "console/nodes.html", {
        "section": "nodes", "pools": selectors.nodes_view(), "field_rows": _field_rows(form, errors),
        "form_errors": [m for f, msgs in errors.items() if f not in form.fields for m in msgs],
        "new_token": new_token,
    }, status=status)


@operator_required
def nodes(request):
    if request.method == "POST":
        try:
            node = services.add_node(request.user, request.POST)
        except ConsoleError as error:
            return _nodes_page(request, form=NewNodeForm(request.POST), errors=error.errors, status=400)
        messages.success(request, gettext("Node %(node)s added to %(pool)s: issue its agent token, then start its "
                                          "agent; it is not ready until the agent reports.") % {
            "node": node.name, "pool": node.pool.name})
        return redirect("console-nodes")
    return _nodes_page(request)


@require_POST
@operator_required
def node_labels(request, name):
    node = get_object_or_404(Node, name=name)
    try:
        services.set_node_labels(request.user, node, request.POST)
    except ConsoleError as error:
        for msgs in error.errors.values():
            for m in msgs:
                messages.error(request, gettext("Labels of %(node)s not saved: %(why)s") % {"node": node.name, "why": m})
        return redirect("console-nodes")
    messages.success(request, gettext("Labels of %(node)s saved.") % {"node": node.name})
    return redirect("console-nodes")


@operator_required
def node_remove(request, name):
    """GET: confirm, or why it is refused; POST: remove."""
    node = get_object_or_404(Node, name=name)
    errors: list[str] = []
    if request.method == "POST":
        try:
            services.remove_node(request.user, node)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("Node %(node)s removed.") % {"node": name})
            return redirect("console-nodes")
    return render(request, "console/node_remove.html", {
        "section": "nodes", "node": node, "refusals": errors or services.node_removal_refusals(node),
    }, status=400 if errors else 200)


@require_POST
@operator_required
def node_token(request, name):
    """A new agent token for the node, shown once on the nodes page (only its hash is kept)."""
    node = get_object_or_404(Node, name=name)
    _token, raw = services.create_node_token(request.user, node)
    return _nodes_page(request, new_token={"node": node.name, "raw": raw})


@require_POST
@operator_required
def node_cordon(request, name):
    node = get_object_or_404(Node, name=name)
    cordon = request.POST.get("cordon") == "1"
    services.set_cordoned(request.user, node, cordon)
    said = gettext("Node %(node)s cordoned.") if cordon else gettext("Node %(node)s uncordoned.")
    messages.info(request, said % {"node": node.name})
    return redirect("console-nodes")


@operator_required
def node_drain(request, name):
    node = get_object_or_404(Node, name=name)
    if request.method == "POST":
        done = services.drain(request.user, node)
        messages.success(request, gettext("Node %(node)s drained: %(moves)s preemptible replicas requeued, "
                                          "%(stays)s finish in place.") % {
            "node": node.name, "moves": len(done.moves), "stays": len(done.stays)})
        return redirect("console-nodes")
    return render(request, "console/drain.html", {"section": "nodes", "preview": services.drain_preview(node)})


# --------------------------------------------------------------------------- queues


# The queue tree editor and allocation history: portal/console/queues.py


# --------------------------------------------------------------------------- workspaces


@operator_required
def workspaces(request):
    errors, values = {}, {}
    if request.method == "POST":
        values = request.POST
        queue = Queue.objects.filter(name=request.POST.get("queue") or "").first()
        try:
            ws = services.create_workspace(request.user, request.POST.get("slug", ""), request.POST.get("name", ""),
                                           queue=queue)
            messages.success(request, gettext("Workspace %(workspace)s created.") % {"workspace": ws.slug})
            return redirect("console-workspace", slug=ws.slug)
        except ConsoleError as error:
            errors = error.errors
    rows = Workspace.objects.prefetch_related("memberships__user", "queue_access__queue")
    leaf_queues = Queue.objects.filter(children__isnull=True).order_by("name")
    return render(request, "console/workspaces.html", {"section": "workspaces", "workspaces": rows,
                                                       "errors": errors, "values": values, "queues": leaf_queues},
                  status=400 if errors else 200)


class MemberForm(forms.Form):
    """Add a member to a workspace, or change a member's role."""

    username = forms.CharField(label=_("User"), max_length=150, widget=forms.TextInput(attrs={"id": "f-username"}),
                               help_text=_("The username of an existing account (create accounts on the Users page)"))
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.MEMBER,
                             help_text=_("Owner: submits jobs, manages the budget and may block submissions. Member: "
                                         "submits jobs. Viewer: sees jobs and reports. Finance: budget and reports. "
                                         "A workspace keeps at least one owner."))


def _form_fail(form: forms.Form, error: ConsoleError) -> None:
    for field, msgs in error.errors.items():
        for message in msgs:
            form.add_error(field if field in form.fields else None, message)


@operator_required
def workspace_detail(request, slug):
    workspace = get_object_or_404(Workspace, slug=slug)
    member_form, grant_errors = MemberForm(), {}
    if request.method == "POST":
        if "remove" in request.POST:  # removing asks first
            membership = get_object_or_404(Membership, pk=request.POST["remove"], workspace=workspace)
            return redirect("console-member-remove", slug=slug, pk=membership.pk)
        if "storage_quota" in request.POST:
            text = request.POST["storage_quota"].strip()
            if text and not (text.isdigit() and len(text) <= 9):
                grant_errors = {"storage_quota": [gettext("The storage quota is a whole number of GiB, or blank for "
                                                          "no limit.")]}
            else:
                before = storage.quota_gib(workspace)
                storage.set_storage_quota(workspace, int(text) if text else None)
                audit.record(request.user, "change", workspace,
                             changes={"storage_quota_gib": [before, int(text) if text else None]})
                messages.success(request, gettext("Storage quota of %(workspace)s: %(quota)s.") % {
                    "workspace": workspace.slug, "quota": f"{text} GiB" if text else gettext("no limit")})
                return redirect("console-workspace", slug=slug)
        elif "queue" in request.POST:
            queue = get_object_or_404(Queue, name=request.POST["queue"])
            try:
                services.grant_queue(request.user, workspace, queue, is_default=bool(request.POST.get("is_default")))
            except ConsoleError as error:
                grant_errors = error.errors
            else:
                messages.success(request, gettext("Queue %(queue)s granted to %(workspace)s.") % {
                    "queue": queue.name, "workspace": workspace.slug})
                return redirect("console-workspace", slug=slug)
        else:
            member_form = MemberForm(request.POST)
            if member_form.is_valid():
                existing = workspace.memberships.filter(user__username=member_form.cleaned_data["username"]).first()
                try:
                    m = services.set_member(request.user, workspace, **member_form.cleaned_data)
                except ConsoleError as error:
                    _form_fail(member_form, error)
                else:
                    said = {"user": m.user.username, "role": m.get_role_display().lower(), "workspace": workspace.slug}
                    messages.success(request, (gettext("%(user)s is now %(role)s of %(workspace)s.") if existing
                                               else gettext("%(user)s added to %(workspace)s as %(role)s.")) % said)
                    return redirect("console-workspace", slug=slug)
    return render(request, "console/workspace_detail.html", {
        "section": "workspaces", "workspace": workspace, "roles": Role.choices, "member_form": member_form,
        "grant_errors": grant_errors, "currency": currency_at(workspace),
        "members": workspace.memberships.select_related("user").order_by("user__username"),
        "access": workspace.queue_access.select_related("queue").order_by("queue__name"),
        "queues": Queue.objects.filter(children__isnull=True).order_by("name"),
        "storage_quota": storage.quota_gib(workspace), "storage_used": storage.used_gib(workspace),
    }, status=400 if member_form.errors or grant_errors else 200)


@operator_required
def member_remove(request, slug, pk):
    """GET: who loses what, or why it is refused; POST: remove the member."""
    membership = get_object_or_404(Membership.objects.select_related("user", "workspace"), pk=pk,
                                   workspace__slug=slug)
    errors: list[str] = []
    if request.method == "POST":
        try:
            services.remove_member(request.user, membership)
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
        else:
            messages.success(request, gettext("%(user)s removed from %(workspace)s.") % {
                "user": membership.user.username, "workspace": slug})
            return redirect("console-workspace", slug=slug)
    return render(request, "console/member_remove.html", {
        "section": "workspaces", "membership": membership, "errors": errors,
        "last_owner": membership.role == Role.OWNER
        and not membership.workspace.memberships.filter(role=Role.OWNER).exclude(pk=membership.pk).exists(),
    }, status=400 if errors else 200)


# --------------------------------------------------------------------------- price tables


def _rates_text(table: PriceTable | None) -> str:
    if table is None:
        return ""
    return "\n".join(f"{r.vendor} {r.gpu_model} {r.per_gpu_hour.normalize():f}" for r in table.gpu_rates.all())


def _storage_rates_text(table: PriceTable | None) -> str:
    if table is None:
        return ""
    return "\n".join(f"{r.storage_class} {r.per_gib_month.normalize():f}" for r in table.storage_rates.all())


class PriceTableConsoleForm(PriceTableForm):
    """The price-table form with the GPU and storage rates as text (the service parses them)."""

    gpu_rates = forms.CharField(
        label=_("GPU rates"), widget=forms.Textarea(attrs={"rows": 7, "id": "f-rates"}),
        help_text=_("One a line: vendor gpu_model price_per_gpu_hour, e.g. \"nvidia H100-80GB 3.20\". Vendor: nvidia "
                    "or amd."))
    storage_rates = forms.CharField(
        label=_("Storage rates"), required=False, widget=forms.Textarea(attrs={"rows": 3, "id": "f-storage-rates"}),
        help_text=_("One a line: storage_class price_per_gib_month, e.g. \"standard 0.10\". Billed on the bytes used, "
                    "sampled every hour; a class not listed is not billed."))


PRICE_FIELD_IDS = {"effective_from": "f-effective", "offpeak_windows": "f-offpeak"}


def _price_values(table: PriceTable | None, **overrides) -> dict:
    values = {"currency": table.currency if table else default_currency(), "gpu_rates": _rates_text(table),
              "storage_rates": _storage_rates_text(table)}
    for f in PRICE_FIELDS:
        if f in ("currency", "effective_from"):
            continue  # set above and below
        v = getattr(table, f) if table else ""
        values[f] = f"{v.normalize():f}" if isinstance(v, Decimal) else v
    if table is not None:
        values["effective_from"] = timezone.localtime(table.effective_from).strftime("%Y-%m-%d %H:%M")
    return {**values, **overrides}


def _render_price_form(request, template: str, form, errors: dict, **context):
    for field, element_id in PRICE_FIELD_IDS.items():
        form.fields[field].widget.attrs["id"] = element_id
    # times are read in the operator's zone: say which
    form.fields["effective_from"].label = gettext("Effective from (YYYY-MM-DD HH:MM in %(zone)s, future)") % {
        "zone": timezone.get_current_timezone_name()}
    return render(request, template, {
        "section": "prices", "field_rows": _field_rows(form, errors),
        "form_errors": [m for f, msgs in errors.items() if f not in form.fields for m in msgs], **context,
    }, status=400 if errors else 200)


def _new_version_form(rows: list[dict], currency: str) -> PriceTableConsoleForm:
    """A new version of `currency`'s timeline, prefilled from its table in force (else its latest)."""
    own = [r for r in rows if r["table"].currency == currency]
    current = next((r["table"] for r in own if r["status"] == "in force"), None) or (own[0]["table"] if own else None)
    tomorrow = (timezone.localtime(clock.now()) + timezone.timedelta(days=1)).replace(
        hour=0, minute=0, second=0, microsecond=0)
    return PriceTableConsoleForm(initial=_price_values(
        current, currency=currency, name=f"Prices from {tomorrow:%Y-%m-%d}",
        effective_from=tomorrow.strftime("%Y-%m-%d %H:%M")))


def _prices_page(request, form, errors: dict, *, currency_errors: dict | None = None, status: int | None = None):
    response = _render_price_form(request, "console/prices.html", form, errors, rows=selectors.price_table_rows(),
                                  currencies=selectors.workspace_currency_rows(),
                                  workspaces=Workspace.objects.order_by("slug"), known_currencies=KNOWN_CURRENCIES,
                                  currency_errors=currency_errors or {})
    if status is not None:
        response.status_code = status
    return response


@operator_required
def prices(request):
    errors = {}
    if request.method == "POST":
        try:
            table = services.create_price_table(request.user, request.POST)
            messages.success(request, gettext("Price table %(table)s takes effect %(when)s on the %(currency)s "
                                              "timeline.") % {"table": table.name, "currency": table.currency,
                                                              "when": f"{table.effective_from:%Y-%m-%d %H:%M}"})
            return redirect("console-prices")
        except ConsoleError as error:
            errors = error.errors
        form = PriceTableConsoleForm(request.POST)
    else:
        wanted = str(request.GET.get("currency") or "").strip().upper()
        currency = wanted if wanted in KNOWN_CURRENCIES else default_currency()
        form = _new_version_form(selectors.price_table_rows(), currency)
    return _prices_page(request, form, errors)


@operator_required
@require_POST
def workspace_currency(request):
    """Bill a workspace in a currency (refused, 409, where that would mix currencies in a month)."""
    workspace = get_object_or_404(Workspace, slug=str(request.POST.get("workspace") or "")[:50])
    try:
        note = services.set_workspace_currency(request.user, workspace, request.POST.get("currency", ""))
    except DomainError as error:
        form = _new_version_form(selectors.price_table_rows(), default_currency())
        return _prices_page(request, form, {}, currency_errors=error.errors, status=error.status)
    messages.success(request, note)
    return redirect("console-prices")


@operator_required
def price_edit(request, pk):
    table = get_object_or_404(PriceTable.objects.prefetch_related("gpu_rates", "storage_rates"), pk=pk)
    errors = {}
    if request.method == "POST":
        try:
            table = services.update_price_table(request.user, table, request.POST)
            messages.success(request, gettext("Price table %(table)s saved; it takes effect %(when)s.") % {
                "table": table.name, "when": f"{timezone.localtime(table.effective_from):%Y-%m-%d %H:%M}"})
            return redirect("console-prices")
        except ConsoleError as error:
            errors = error.errors
        form = PriceTableConsoleForm(request.POST)
    else:
        form = PriceTableConsoleForm(initial=_price_values(table))
        if table.effective_from <= clock.now():
            errors = {"": [gettext("This version is in force or past, so it is read-only: prices of the past never "
                                   "change. Create a new version instead.")]}
    return _render_price_form(request, "console/price_form.html", form, errors, table=table,
                              read_only=table.effective_from <= clock.now())


@operator_required
def price_withdraw(request, pk):
    table = get_object_or_404(PriceTable.objects.prefetch_related("gpu_rates", "storage_rates"), pk=pk)
    errors = []
    if request.method == "POST":
        try:
            services.withdraw_price_table(request.user, table)
            messages.success(request, gettext("Price table %(table)s withdrawn; the version in force stays in force.")
                             % {"table": table.name})
            return redirect("console-prices")
        except ConsoleError as error:
            errors = [m for msgs in error.errors.values() for m in msgs]
    elif table.effective_from <= clock.now():
        errors = [gettext("This version is in force or past, so it cannot be withdrawn: prices of the past never "
                          "change.")]
    return render(request, "console/price_withdraw.html", {"section": "prices", "table": table, "errors": errors},
                  status=400 if errors else 200)


# --------------------------------------------------------------------------- node tokens


@operator_required
def tokens(request):
    new = None
    if request.method == "POST":
        if "revoke" in request.POST:
            token = get_object_or_404(NodeToken, pk=request.POST["revoke"])
            services.revoke_node_token(request.user, token)
            messages.info(request, gettext("Token %(hint)s… of %(node)s revoked.") % {
                "hint": token.hint, "node": token.node.name})
            return redirect("console-tokens")
        node = get_object_or_404(Node, name=request.POST.get("node", ""))
        token, raw = services.create_node_token(request.user, node)
        new = {"node": node.name, "raw": raw}
    return render(request, "console/tokens.html", {"section": "tokens", "rows": selectors.tokens_by_node(), "new": new})


# --------------------------------------------------------------------------- audit


def _audit_entries(request):
    """The entries the filters select; a bad filter is the styled 400 page."""
    try:
        return selectors.audit_entries(request.GET)
    except ValueError as error:
        raise DomainError(str(error)) from None


@operator_required
def audit_log(request):
    entries = _audit_entries(request)
    page = Paginator(entries.select_related("user"), 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "console/audit.html", {
        "section": "audit", "page": page, "filters": request.GET, "choices": selectors.audit_choices(),
        "sources": AuditEntry.Source.choices, "query": query.urlencode(),
    })


@operator_required
def audit_csv(request):
    """The filtered audit log as UTF-8 CSV, every entry (not one page), times in ISO 8601 UTC."""
    entries = _audit_entries(request)  # checked before the first byte is sent
    response = StreamingHttpResponse(selectors.audit_csv_lines(entries, translation.get_language() or "en"),
                                     content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{clock.now():%Y%m%d-%H%M%S}.csv"'
    return response
