from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Tenants"

    def ready(self):
        from portal.api import schema  # noqa: F401 - registers the OpenAPI auth extension
