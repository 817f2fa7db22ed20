"""Notebook homes become workspace volumes (home_of names the notebook).

Each live notebook's home, and each home folder of the simulated cluster (NOTEBOOK_HOME_DIR/<workspace>/<name>),
gets its Volume row, sized as the latest notebook of that name asked (10 GiB when none says), outside the
storage quota's check (the files exist already). A folder moves to the volume's folder
(VOLUMES_DIR/<workspace>/<volume>) unless one is there; on Kubernetes the claim keeps its name (home-<name>)
and its files. An ended notebook's Kubernetes claim gets its row when a notebook of that name is submitted again.
"""

import hashlib
import math
import re
import shutil
from pathlib import Path

from django.conf import settings
from django.db import migrations, models

FINAL = ("Succeeded", "Failed", "Cancelled")
DEFAULT_HOME_GIB = 10
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Mi|Gi|Ti)$")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _home_gib(spec) -> int:
    size = ((spec or {}).get("home") or {}).get("size") if isinstance(spec, dict) else None
    match = _SIZE.fullmatch(size) if isinstance(size, str) else None
    if match is None:
        return DEFAULT_HOME_GIB
    mib = float(match.group(1)) * {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}[match.group(2)]
    return max(1, math.ceil(mib / 1024))


def _name(notebook: str, taken: set[str]) -> str:
    name = f"home-{notebook}"
    if len(name) > 63:
        name = f"{name[:56].rstrip('-')}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"
    if name in taken:  # an ordinary volume has the name already
        name = f"{name[:56].rstrip('-')}-{hashlib.sha1(f'home-of:{notebook}'.encode()).hexdigest()[:6]}"
    return name


def homes_as_volumes(apps, schema_editor):
    Job = apps.get_model("scheduling", "Job")
    Volume = apps.get_model("scheduling", "Volume")
    Workspace = apps.get_model("portal", "Workspace")
    homes: set[tuple[int, str]] = set(
        Job.objects.filter(kind="notebook").exclude(state__in=FINAL).values_list("workspace_id", "name"))
    old_root = Path(settings.NOTEBOOK_HOME_DIR)
    slugs = dict(Workspace.objects.values_list("id", "slug"))
    ids = {slug: pk for pk, slug in slugs.items()}
    if old_root.is_dir():
        for folder in old_root.iterdir():
            if folder.is_dir() and folder.name in ids:
                homes |= {(ids[folder.name], home.name) for home in folder.iterdir()
                          if home.is_dir() and _LABEL.fullmatch(home.name)}
    for workspace_id, notebook in sorted(homes):
        if Volume.objects.filter(workspace_id=workspace_id, home_of=notebook).exists():
            continue
        latest = Job.objects.filter(workspace_id=workspace_id, kind="notebook", name=notebook).order_by("-pk").first()
        taken = set(Volume.objects.filter(workspace_id=workspace_id).values_list("name", flat=True))
        volume = Volume.objects.create(workspace_id=workspace_id, name=_name(notebook, taken), home_of=notebook,
                                       size_gib=_home_gib(latest.spec if latest else None))
        old = old_root / slugs[workspace_id] / notebook
        new = Path(settings.VOLUMES_DIR) / slugs[workspace_id] / volume.name
        if old.is_dir() and not new.exists():
            new.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(old), str(new))


def homes_back(apps, schema_editor):
    """Back to the notebooks' own folders; the rows go with the column."""
    Volume = apps.get_model("scheduling", "Volume")
    for volume in Volume.objects.exclude(home_of="").select_related("workspace"):
        new = Path(settings.VOLUMES_DIR) / volume.workspace.slug / volume.name
        old = Path(settings.NOTEBOOK_HOME_DIR) / volume.workspace.slug / volume.home_of
        if new.is_dir() and not old.exists():
            old.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(new), str(old))
        volume.delete()


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0005_loginbackoff'),
        ('scheduling', '0018_workspace_buckets'),
    ]

    operations = [
        migrations.AddField(
            model_name='volume',
            name='home_of',
            field=models.CharField(blank=True, default='', help_text='The notebook whose home this volume is (empty: an ordinary volume)', max_length=63),
        ),
        migrations.AddConstraint(
            model_name='volume',
            constraint=models.UniqueConstraint(condition=models.Q(('home_of', ''), _negated=True), fields=('workspace', 'home_of'), name='one_home_per_notebook'),
        ),
        migrations.RunPython(homes_as_volumes, homes_back),
    ]
