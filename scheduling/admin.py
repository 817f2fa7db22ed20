from django.contrib import admin

from scheduling.forms import NodePoolForm, QueueForm
from scheduling.models import (
    Gpu,
    Job,
    JobEvent,
    Node,
    NodePool,
    Queue,
    QueueAccess,
    Replica,
    StorageQuota,
    Volume,
)


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0


@admin.register(NodePool)
class NodePoolAdmin(admin.ModelAdmin):
    form = NodePoolForm
    list_display = ["name", "vendor", "gpu_model", "gpu_memory_mib", "sharing", "placement", "spot"]
    list_filter = ["vendor", "sharing", "spot"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "pool", "ready", "cordoned", "last_heartbeat"]
    list_filter = ["pool", "ready", "cordoned"]
    search_fields = ["name"]
    inlines = [GpuInline]
    actions = ["lose_nodes", "restore_nodes"]

    @admin.action(description="Simulated cluster: lose the selected nodes (their replicas are requeued)")
    def lose_nodes(self, request, queryset):
        self.message_user(request, f"{queryset.update(ready=False)} nodes lost")

    @admin.action(description="Simulated cluster: bring the selected nodes back")
    def restore_nodes(self, request, queryset):
        self.message_user(request, f"{queryset.update(ready=True)} nodes back")


class QueueAccessInline(admin.TabularInline):
    model = QueueAccess
    extra = 0


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    form = QueueForm
    list_display = ["name", "parent", "deserved_gpus", "over_quota_weight", "limit_gpus", "priority",
                    "preemptible_only"]
    inlines = [QueueAccessInline]


class ReadOnlyInline:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReplicaInline(ReadOnlyInline, admin.TabularInline):
    model = Replica
    extra = 0
    readonly_fields = ["role", "index", "state", "node", "gpu_indices", "slice", "started", "ended"]


class JobEventInline(ReadOnlyInline, admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ["time", "kind", "state", "reason", "data"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """A job exists only once it was submitted (priced, its quote frozen) and is billed from then on: the
    admin shows it and its history, changes go through the services (cancel, the console)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["id", "name", "workspace", "queue", "state", "priority", "preemptible", "created"]
    list_filter = ["state", "workspace", "queue"]
    search_fields = ["name"]
    inlines = [ReplicaInline, JobEventInline]


@admin.register(JobEvent)
class JobEventAdmin(ReadOnlyAdmin):
    list_display = ["time", "job", "kind", "state", "reason"]
    list_filter = ["kind", "state"]


@admin.register(StorageQuota)
class StorageQuotaAdmin(admin.ModelAdmin):
    """The operator's storage quota per workspace (the console's workspace page sets it too)."""

    list_display = ("workspace", "limit_gib")
    search_fields = ("workspace__slug",)


@admin.register(Volume)
class VolumeAdmin(ReadOnlyAdmin):
    list_display = ("workspace", "name", "size_gib", "access_mode", "storage_class", "created")
    list_filter = ("access_mode",)
    search_fields = ("workspace__slug", "name")
