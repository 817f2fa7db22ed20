"""Where scheduling decisions go: the simulated cluster (embedded default) or Kubernetes."""

from django.conf import settings


def get_backend():
    if settings.SCHEDULER_BACKEND == "kubernetes":
        from scheduling.backends.kubernetes.backend import KubernetesBackend

        return KubernetesBackend.from_settings()
    if settings.SCHEDULER_BACKEND == "simulated":
        from scheduling.backends.simulated.backend import SimulatedBackend

        return SimulatedBackend()
    raise ValueError(f"SCHEDULER_BACKEND must be simulated or kubernetes, not {settings.SCHEDULER_BACKEND!r}")
