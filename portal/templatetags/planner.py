"""The operator dashboard's pool-against-silos figure (portal/console/planner_services.py), as a tag so the
dashboard's view needs nothing new."""

from django import template

register = template.Library()


@register.inclusion_tag("console/_planner_savings.html", takes_context=True)
def pool_savings(context):
    from portal.console.planner_services import latest_savings

    return {"savings": latest_savings(), "csrf_token": context.get("csrf_token"), "platform_now": context.get("platform_now")}
