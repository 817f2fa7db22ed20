from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operator console"

    def ready(self) -> None:
        from console import audit

        audit.connect_admin_hooks()
