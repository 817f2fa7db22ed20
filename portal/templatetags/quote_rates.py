"""{% quote_rate_note job %}: a job's frozen quote's rates, as the Submit page wrote them."""

from django import template

from portal.submit_page import rate_note
from scheduling import kinds

register = template.Library()


@register.simple_tag
def quote_rate_note(job):
    """{% quote_rate_note job %}: a job's frozen quote's rates as the Submit page wrote them (a service at its
    fewest, one and most replicas, each for the hours quoted); '' for a kind whose total is for its run."""
    quote = job.quote if isinstance(job.quote, dict) else {}
    if not {"price_per_hour", "roles", "total", "duration_hours"} <= quote.keys():
        return ""
    return rate_note(quote, kinds.kind_of(job).name, quote.get("currency", ""))
