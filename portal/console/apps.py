from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "portal.console"
    label = "console"
    verbose_name = "Operator console"

    def ready(self) -> None:
        from portal.console import audit

        audit.connect_admin_hooks()
