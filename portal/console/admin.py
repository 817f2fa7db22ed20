from django.contrib import admin

from portal.console.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """The audit log is written by the platform, never edited."""

    list_display = ["time", "username", "source", "action", "target_type", "target_repr"]
    list_filter = ["source", "action", "target_type"]
    search_fields = ["username", "target_repr", "message"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
