from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "portal.console"
    label = "console"
    verbose_name = "Operator console"

    def ready(self) -> None:
        from portal.console import audit, health_services
        from scheduling.api import node_readiness_changed

        audit.connect_admin_hooks()
        node_readiness_changed.connect(health_services.record_readiness_changes,
                                       dispatch_uid="console-audit-node-readiness")
