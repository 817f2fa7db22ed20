"""{% ledger_line_rows rows %}: the finance report's ledger lines as table rows.

Up to 500 lines of 16 cells each: through the template engine they were most of the report page's
CPU (a node, a variable lookup and an escape per cell). Built here with the same filters the template
used (date, floatformat, the reader's number format), escaped by format_html, the same HTML out. The rows' HTML is kept with the ledger's sums (billing's
ledger_read: until the next ledger write), per language and time zone: every reader of the same report
between two writes shares one rendering."""

from django import template
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import get_language, gettext

from billing.api import ledger_read
from billing.models import ChargeLine

register = template.Library()

_ROW = ('<tr{}><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td>\n      <td>{}</td><td>{}</td><td>{}</td><td>{}</td>\n'
        '      <td>{}</td><td>{}</td><td>{}</td>\n      <td>{}</td><td>{}</td>\n'
        '      <td>{}</td><td>{}</td><td>{}</td></tr>\n')
_JOB_PLACEHOLDER = 987654321
# the columns a row shows: read as values, not as model instances (a line has some 30 columns)
_COLUMNS = ("provisional", "hour", "workspace__slug", "category", "offpeak", "queue", "job_id", "job_name", "reason",
            "node", "gpu_model", "sharing", "allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours",
            "cpu_core_hours", "memory_gib_hours", "list_cost", "cost", "currency", "resource", "resource_name", "sku_id")


def _text(value) -> str:
    """What {{ value }} shows: numbers in the reader's format, None as "None"."""
    return formats.localize(value)


@register.simple_tag
def ledger_line_rows(rows):
    """`rows`: a queryset of ChargeLine, ordered and sliced."""
    reader = ("ledger-line-rows", get_language(), timezone.get_current_timezone_name())
    html = ledger_read(rows, lambda: _rows_html(rows), also=reader)
    return mark_safe(html)  # noqa: S308 - every part went through format_html


def _rows_html(rows) -> str:
    categories = dict(ChargeLine.Category.choices)
    job_url = reverse("job", args=[_JOB_PLACEHOLDER])
    provisional = format_html(' class="provisional" title="{}"', gettext("the hour is still open"))
    off_peak = format_html(" · {}", gettext("off-peak"))
    out = []
    for (is_open, hour, slug, category, is_off_peak, queue, job_id, job_name, reason, node, gpu_model, sharing,
         allocated, used, idle, cpu, memory, list_cost, cost, currency, resource, resource_name,
         sku_id) in rows.values_list(*_COLUMNS):
        hour = formats.date_format(timezone.localtime(hour) if timezone.is_aware(hour) else hour, "Y-m-d H:i")
        attributes = provisional if is_open else ""
        if job_id:
            job = format_html('<a href="{}">{}</a>', job_url.replace(str(_JOB_PLACEHOLDER), str(job_id)), job_name)
        elif resource == ChargeLine.Resource.STORAGE:  # a line of no job: what it stored says what it is
            job = format_html("{}", gettext("Storage (%(storage_class)s): %(name)s") % {
                "storage_class": sku_id.removeprefix("storage/"), "name": resource_name})
            attributes = format_html('{} data-storage="{}"', attributes, resource_name)
        else:
            job = format_html("{}", reason)
        out.append(format_html(
            _ROW, attributes, hour, slug, categories.get(category, category),
            off_peak if is_off_peak else "", queue, job, node, gpu_model, sharing,
            floatformat(allocated, 3), floatformat(used, 3), floatformat(idle, 3),
            floatformat(cpu, 2), floatformat(memory, 2), _text(list_cost), _text(cost), _text(currency)))
    return "    ".join(out)
