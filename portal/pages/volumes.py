"""The Volumes page of a workspace: its volumes (size, access mode, class) and storage quota, its datasets and
those shared with it, and its S3-compatible buckets (owners register and delete them). Owners and members create, grow, upload to, snapshot and delete (after a confirmation);
owners share a dataset with another workspace; viewers and finance read. Outsiders get a 404."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from portal.secrets import services as secret_services
from portal.selectors import get_workspace_for_user
from scheduling.api import DomainError, buckets, get_backend, secrets, storage
from scheduling.models import AccessMode, Volume


class VolumeForm(forms.Form):
    name = forms.SlugField(label=_("Name"), max_length=63, widget=forms.TextInput(attrs={"id": "f-volume-name"}),
                           help_text=_("What specs mount it by: volumes: [{name: ..., mountPath: /data}]"))
    size_gib = forms.IntegerField(label=_("Size (GiB)"), min_value=1, max_value=storage.MAX_VOLUME_GIB,
                                  widget=forms.NumberInput(attrs={"id": "f-volume-size"}))
    access_mode = forms.ChoiceField(label=_("Access mode"), choices=AccessMode.choices,
                                    initial=AccessMode.READ_WRITE_ONCE)
    storage_class = forms.SlugField(label=_("Storage class"), max_length=63, initial="standard")


class ResizeForm(forms.Form):
    size_gib = forms.IntegerField(label=_("New size (GiB)"), min_value=1, max_value=storage.MAX_VOLUME_GIB)


class UploadForm(forms.Form):
    file = forms.FileField(label=_("File"))
    path = forms.CharField(label=_("Path in the volume"), max_length=1024, required=False,
                           help_text=_("Default: the file's name at the volume's root"))


class GrantForm(forms.Form):
    workspace = forms.SlugField(label=_("Workspace"), help_text=_("It may mount the dataset's versions, read-only"))


class BucketForm(forms.Form):
    name = forms.SlugField(label=_("Name"), max_length=63, widget=forms.TextInput(attrs={"id": "f-bucket-name"}),
                           help_text=_("What specs read it by: buckets: [{name: ...}]"))
    endpoint = forms.CharField(label=_("Endpoint"), max_length=buckets.MAX_ENDPOINT,
                               help_text=_("The store's http(s) address, e.g. https://s3.example.com"))
    bucket = forms.CharField(label=_("Bucket"), max_length=63)
    prefix = forms.CharField(label=_("Prefix"), max_length=buckets.MAX_PREFIX, required=False, strip=False)
    region = forms.CharField(label=_("Region"), max_length=32, initial=buckets.DEFAULT_REGION)
    access_key_id = forms.CharField(label=_("Secret with the access key id"), max_length=63)
    secret_access_key = forms.CharField(label=_("Secret with the secret access key"), max_length=63)


# the service names the credentials as the API takes them; the form has a field of its own for each
_FORM_FIELD = {buckets.ACCESS_KEY_FIELD: "access_key_id", buckets.SECRET_KEY_FIELD: "secret_access_key"}


def _into(form: forms.Form, error: DomainError) -> None:
    for field, msgs in error.errors.items():
        field = _FORM_FIELD.get(field, field)
        for message in msgs:
            form.add_error(field if field in form.fields else None, message)


def _page(request, workspace, *, status: int = 200, **forms_given):
    can_manage = storage.can_manage(request.user, workspace)
    datasets = list(storage.visible_datasets(workspace).order_by("workspace__slug", "name"))
    context = {
        "workspace": workspace, "can_manage": can_manage,
        "can_share": can_manage and workspace.memberships.filter(user=request.user, role="owner").exists(),
        "volumes": Volume.objects.filter(workspace=workspace).order_by("name"),
        "used_gib": storage.used_gib(workspace), "quota_gib": storage.quota_gib(workspace),
        "own_datasets": [d for d in datasets if d.workspace_id == workspace.pk],
        "shared_datasets": [d for d in datasets if d.workspace_id != workspace.pk],
        "volume_form": forms_given.get("volume_form") or VolumeForm(),
        "resize_errors": forms_given.get("resize_errors") or {},
        "upload_errors": forms_given.get("upload_errors") or {},
        "grant_errors": forms_given.get("grant_errors") or {},
        "errors": forms_given.get("errors") or [],
        "upload_limit": settings.VOLUME_UPLOAD_MAX_BYTES,
        "buckets": buckets.buckets_of(workspace),
        "can_add_buckets": secrets.may_manage(request.user, workspace),
        "bucket_form": forms_given.get("bucket_form") or BucketForm(),
    }
    return render(request, "portal/volumes.html", context, status=status)


def _messages_of(error: DomainError) -> list[str]:
    return [m for msgs in error.errors.values() for m in msgs]


def _form_refused(request, workspace, form, name: str, apply):
    """`apply(form.cleaned_data)`; the page again with the form (as `name`) and its errors beside their fields
    when the form or the service refuses, else None."""
    if not form.is_valid():
        return _page(request, workspace, status=400, **{name: form})
    try:
        apply(form.cleaned_data)
    except DomainError as error:
        _into(form, error)
        return _page(request, workspace, status=error.status, **{name: form})
    return None


@login_required
@require_http_methods(["GET", "POST"])
def volumes(request, slug):
    """GET the page; POST creates a volume (its form), grows one, snapshots one or shares a dataset."""
    workspace = get_workspace_for_user(request.user, slug)
    if request.method == "GET":
        return _page(request, workspace)
    storage.require_manager(request.user, workspace)  # a 403 for viewers and finance
    action = request.POST.get("action")
    try:
        if action == "create":
            form = VolumeForm(request.POST)
            refused = _form_refused(request, workspace, form, "volume_form",
                                    lambda data: storage.create_volume(request.user, workspace, **data))
            if refused:
                return refused
            messages.success(request, gettext("Volume %(name)s created.") % {"name": form.cleaned_data["name"]})
        elif action == "resize":
            name, form = request.POST.get("volume", ""), ResizeForm(request.POST)
            if not form.is_valid():
                return _page(request, workspace, status=400,
                             resize_errors={name: [m for ms in form.errors.values() for m in ms]})
            try:
                storage.resize_volume(request.user, workspace, name, form.cleaned_data["size_gib"])
            except DomainError as error:
                return _page(request, workspace, status=error.status, resize_errors={name: _messages_of(error)})
            messages.success(request, gettext("Volume %(name)s is now %(size)s GiB.") % {
                "name": name, "size": form.cleaned_data["size_gib"]})
        elif action == "snapshot":
            version = storage.snapshot(request.user, workspace, request.POST.get("volume", ""),
                                       request.POST.get("dataset") or None, backend=get_backend())
            messages.success(request, gettext("%(ref)s made: a read-only snapshot of volume %(volume)s.") % {
                "ref": f"{version.dataset.name}@v{version.number}", "volume": version.source_volume})
        elif action == "grant":
            name, form = request.POST.get("dataset", ""), GrantForm(request.POST)
            if not form.is_valid():
                return _page(request, workspace, status=400,
                             grant_errors={name: [m for ms in form.errors.values() for m in ms]})
            try:
                storage.grant(request.user, workspace, name, form.cleaned_data["workspace"])
            except DomainError as error:
                return _page(request, workspace, status=error.status, grant_errors={name: _messages_of(error)})
            messages.success(request, gettext("Dataset %(name)s shared with %(workspace)s.") % {
                "name": name, "workspace": form.cleaned_data["workspace"]})
        elif action == "bucket-add":
            form = BucketForm(request.POST)
            refused = _form_refused(request, workspace, form, "bucket_form",
                                    lambda data: secret_services.add_bucket(request.user, workspace, **data))
            if refused:
                return refused
            messages.success(request, gettext("Bucket %(name)s registered.") % {"name": form.cleaned_data["name"]})
        elif action == "bucket-delete":
            name = request.POST.get("bucket", "")
            secret_services.delete_bucket(request.user, workspace, name)
            messages.success(request, gettext("Bucket %(name)s deleted; its objects stay in the store.") % {
                "name": name})
        elif action == "revoke":
            storage.revoke(request.user, workspace, request.POST.get("dataset", ""), request.POST.get("workspace", ""),
                           backend=get_backend())
            messages.success(request, gettext("Sharing taken back."))
        else:
            return _page(request, workspace, status=400, errors=[gettext("Unknown action.")])
    except DomainError as error:
        return _page(request, workspace, status=error.status, errors=_messages_of(error))
    return redirect("workspace-volumes", slug=slug)


@login_required
@require_POST
def volume_upload(request, slug, name):
    workspace = get_workspace_for_user(request.user, slug)
    storage.require_manager(request.user, workspace)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, workspace, status=400, upload_errors={name: [m for ms in form.errors.values() for m in ms]})
    upload = form.cleaned_data["file"]
    try:
        written = storage.upload_file(request.user, workspace, name, form.cleaned_data["path"] or upload.name, upload,
                                      upload.size)
    except DomainError as error:
        return _page(request, workspace, status=error.status, upload_errors={name: _messages_of(error)})
    messages.success(request, gettext("%(path)s uploaded to volume %(name)s.") % {"path": written, "name": name})
    return redirect("workspace-volumes", slug=slug)


@login_required
@require_http_methods(["GET", "POST"])
def volume_delete(request, slug, name):
    """GET: what goes, or which live jobs keep it; POST: delete it."""
    workspace = get_workspace_for_user(request.user, slug)
    storage.require_manager(request.user, workspace)
    volume = storage.get_volume(workspace, name)
    errors: list[str] = []
    if request.method == "POST":
        try:
            storage.delete_volume(request.user, workspace, name, backend=get_backend())
        except DomainError as error:
            errors = _messages_of(error)
        else:
            messages.success(request, gettext("Volume %(name)s deleted.") % {"name": name})
            return redirect("workspace-volumes", slug=slug)
    return render(request, "portal/volume_delete.html", {
        "workspace": workspace, "what": name, "size_gib": volume.size_gib, "errors": errors,
        "mounted_by": storage.jobs_mounting_volume(workspace, name),
    }, status=409 if errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_version_delete(request, slug, name, number):
    workspace = get_workspace_for_user(request.user, slug)
    storage.require_manager(request.user, workspace)
    dataset = storage.get_dataset(workspace, name)
    version = dataset.versions.filter(number=number).first()
    if version is None:
        raise storage.NotFound(gettext("dataset '%(name)s' has no version v%(number)s") % {
            "name": name, "number": number}, field="version")
    errors: list[str] = []
    if request.method == "POST":
        try:
            storage.delete_version(request.user, workspace, name, number, backend=get_backend())
        except DomainError as error:
            errors = _messages_of(error)
        else:
            messages.success(request, gettext("%(ref)s deleted.") % {"ref": f"{name}@v{number}"})
            return redirect("workspace-volumes", slug=slug)
    return render(request, "portal/volume_delete.html", {
        "workspace": workspace, "what": f"{name}@v{number}", "size_gib": None, "errors": errors,
        "mounted_by": storage.jobs_mounting_version(version),
    }, status=409 if errors else 200)
