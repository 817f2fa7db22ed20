"""What a resolved mount answers of its kind (a workspace volume or a dataset version), which the backends ask
instead of comparing the kind's name."""

from __future__ import annotations

from scheduling.storage import DATASET, VOLUME, Mount, dataset_dir, volume_dir


def test_a_volume_is_the_workspaces_own_writable_storage_unless_mounted_read_only():
    scratch = Mount(VOLUME, "vision-lab", "scratch", 0, "/scratch", False)
    assert not scratch.of_dataset and scratch.writable
    assert scratch.host_path() == volume_dir("vision-lab", "scratch")
    assert not Mount(VOLUME, "vision-lab", "scratch", 0, "/scratch", True).writable


def test_a_dataset_version_is_read_only_from_its_snapshot():
    corpus = Mount(DATASET, "nlp-group", "corpus", 3, "/ref", True)
    assert corpus.of_dataset and not corpus.writable
    assert corpus.host_path() == dataset_dir("nlp-group", "corpus", 3)
    assert not Mount(DATASET, "nlp-group", "corpus", 3, "/ref", False).writable  # never written through
