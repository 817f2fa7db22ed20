"""{% ledger_line_rows rows %}: the finance report's ledger lines as table rows.

Up to 500 lines of 16 cells each: through the template engine they were most of the report page's
CPU (a node, a variable lookup and an escape per cell). Built here with the same filters the template
used (date, floatformat, the reader's number format), escaped by format_html, the same HTML out."""

from django import template
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext

register = template.Library()

_ROW = ('<tr{}><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td>\n      <td>{}</td><td>{}</td><td>{}</td><td>{}</td>\n'
        '      <td>{}</td><td>{}</td><td>{}</td>\n      <td>{}</td><td>{}</td>\n'
        '      <td>{}</td><td>{}</td><td>{}</td></tr>\n')
_JOB_PLACEHOLDER = 987654321


def _text(value) -> str:
    """What {{ value }} shows: numbers in the reader's format, None as "None"."""
    return formats.localize(value)


@register.simple_tag
def ledger_line_rows(rows):
    job_url = reverse("job", args=[_JOB_PLACEHOLDER])
    provisional = format_html(' class="provisional" title="{}"', gettext("the hour is still open"))
    off_peak = format_html(" · {}", gettext("off-peak"))
    out = []
    for r in rows:
        hour = formats.date_format(timezone.localtime(r.hour) if timezone.is_aware(r.hour) else r.hour, "Y-m-d H:i")
        job = (format_html('<a href="{}">{}</a>', job_url.replace(str(_JOB_PLACEHOLDER), str(r.job_id)), r.job_name)
               if r.job_id else format_html("{}", r.reason))
        out.append(format_html(
            _ROW, provisional if r.provisional else "", hour, r.workspace.slug, r.get_category_display(),
            off_peak if r.offpeak else "", r.queue, job, r.node, r.gpu_model, r.sharing,
            floatformat(r.allocated_gpu_hours, 3), floatformat(r.used_gpu_hours, 3), floatformat(r.idle_gpu_hours, 3),
            floatformat(r.cpu_core_hours, 2), floatformat(r.memory_gib_hours, 2),
            _text(r.list_cost), _text(r.cost), _text(r.currency)))
    return mark_safe("    ".join(out))  # noqa: S308 - every part went through format_html
