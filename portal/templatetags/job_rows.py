"""{% job_table_rows rows may_cancel %}: the job list's rows (portal.job_lists.JobRow) as table rows.

A page of 50 jobs with 9-10 cells each: through the template engine it was most of the job list's CPU.
Built here with the same filters the template used (date, money, the pending reason, the reader's
number format), escaped by format_html, the same HTML out."""

from django import template
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import get_language, gettext

from portal.templatetags.pending import pending_reason
from scheduling.api import formats as shown

register = template.Library()

_JOB_PLACEHOLDER = 987654321
_ROW = ('<tr data-job="{}">\n      {}<td>{}</td>\n      <td><a href="{}">{}</a></td>\n'
        '      <td><span class="state state-{}" data-field="state">{}</span>\n'
        '        <div class="small hint" data-field="pending_reason">{}</div></td>\n'
        '      <td data-field="submitter">{}</td>\n'
        '      <td class="small" data-field="gpus">{} · {}{}</td>\n'
        '      <td data-field="queue">{}</td>\n'
        '      <td>{}</td>\n'
        '      <td data-field="age" data-timing="{}">{} {}</td>\n'
        '      <td data-field="cost" data-cost="{}">{}</td>\n'
        '    </tr>\n')


def _text(value) -> str:
    """What {{ value }} shows: numbers in the reader's format."""
    return formats.localize(value)


def _pick(job) -> str:
    if job.is_final:
        return '<td class="pick"></td>'
    label = gettext("Select job %(name)s #%(pk)s") % {"name": job.name, "pk": _text(job.pk)}
    return format_html('<td class="pick"><input type="checkbox" class="select-job" name="job" value="{}" '
                       'form="bulk-cancel" aria-label="{}"></td>', _text(job.pk), label)


def _cost(row, final: str, so_far: str) -> str:
    if row.cost is None:
        return "–"
    return format_html('{} <span class="hint">{}</span>', shown.money(row.cost, row.currency),
                       final if row.cost_final else so_far)


# A finished job's row shows what no longer changes, so it is built once per process and reader: most rows of a
# list are finished jobs. The key holds every value the row is built from, so a key never meets another row.
_FINISHED_ROWS: dict[tuple, str] = {}
_FINISHED_ROWS_KEPT = 5000


def _finished_key(r, may_cancel: bool, reader: tuple) -> tuple | None:
    job = r.job
    if not job.is_final:
        return None
    return (job.pk, reader, may_cancel, job.state, job.name, job.queue.name,
            job.submitted_by.username if job.submitted_by_id else "", job.created, job.started, job.finished,
            job.final_cost, r.cost, r.currency, r.gpu_model, r.sharing, repr(job.roles),
            job.pending_code, job.pending_reason, repr(job.pending_params))


@register.simple_tag
def job_table_rows(rows, may_cancel=False):
    """`rows`: the page's JobRow list."""
    reader = (get_language(), timezone.get_current_timezone_name())
    texts = reverse("job", args=[_JOB_PLACEHOLDER]), gettext("final"), gettext("so far")
    out = []
    for r in rows:
        key = _finished_key(r, may_cancel, reader)
        html = _FINISHED_ROWS.get(key) if key is not None else None
        if html is None:
            html = _row(r, may_cancel, *texts)
            if key is not None:
                if len(_FINISHED_ROWS) >= _FINISHED_ROWS_KEPT:
                    _FINISHED_ROWS.clear()
                _FINISHED_ROWS[key] = html
        out.append(html)
    return mark_safe("    ".join(out))  # noqa: S308 - every part went through format_html


def _row(r, may_cancel: bool, job_url: str, final: str, so_far: str) -> str:
    job = r.job
    created = job.created
    if created is not None and timezone.is_aware(created):
        created = timezone.localtime(created)
    model = format_html(' <span class="hint">{}</span>', r.gpu_model) if r.gpu_model else ""
    return format_html(
        _ROW, _text(job.pk), mark_safe(_pick(job)) if may_cancel else "", _text(job.pk),  # noqa: S308 - format_html
        job_url.replace(str(_JOB_PLACEHOLDER), str(job.pk)), job.name, str(job.state).lower(), shown.state_text(job.state),
        pending_reason(job), (job.submitted_by.username if job.submitted_by_id else "") or "–",
        r.gpus, r.sharing or "–", model, job.queue.name,
        formats.date_format(created, "Y-m-d H:i:s") if created else "",
        r.timing, r.timing_label, r.duration_text,
        "" if r.cost is None else _text(r.cost), _cost(r, final, so_far))
