"""The MIG table (scheduling.core.mig): each card's profiles as NVIDIA's MIG User Guide lists them,
the layouts they allow, and pools of every MIG card accepted (the H200 was refused)."""

import json
import re
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from scheduling.core.mig import MIG_CARDS, MIG_PROFILES, MIG_SOURCE, layout_errors, mig_card
from scheduling.models import NodePool, PoolSharing, Vendor

# card: {profile: (memory GB, compute slices, memory slices, max instances)}
EXPECTED = {
    "A30-24GB": {"1g.6gb": (6, 1, 1, 4), "2g.12gb": (12, 2, 2, 2), "4g.24gb": (24, 4, 4, 1)},
    "A100-40GB": {"1g.5gb": (5, 1, 1, 7), "1g.10gb": (10, 1, 2, 4), "2g.10gb": (10, 2, 2, 3),
                  "3g.20gb": (20, 3, 4, 2), "4g.20gb": (20, 4, 4, 1), "7g.40gb": (40, 7, 8, 1)},
    "A100-80GB": {"1g.10gb": (10, 1, 1, 7), "1g.20gb": (20, 1, 2, 4), "2g.20gb": (20, 2, 2, 3),
                  "3g.40gb": (40, 3, 4, 2), "4g.40gb": (40, 4, 4, 1), "7g.80gb": (80, 7, 8, 1)},
    "H100-80GB": {"1g.10gb": (10, 1, 1, 7), "1g.20gb": (20, 1, 2, 4), "2g.20gb": (20, 2, 2, 3),
                  "3g.40gb": (40, 3, 4, 2), "4g.40gb": (40, 4, 4, 1), "7g.80gb": (80, 7, 8, 1)},
    "H100-94GB": {"1g.12gb": (12, 1, 1, 7), "1g.24gb": (24, 1, 2, 4), "2g.24gb": (24, 2, 2, 3),
                  "3g.47gb": (47, 3, 4, 2), "4g.47gb": (47, 4, 4, 1), "7g.94gb": (94, 7, 8, 1)},
    "H200-141GB": {"1g.18gb": (18, 1, 1, 7), "1g.35gb": (35, 1, 2, 4), "2g.35gb": (35, 2, 2, 3),
                   "3g.71gb": (71, 3, 4, 2), "4g.71gb": (71, 4, 4, 1), "7g.141gb": (141, 7, 8, 1)},
    "GH200-96GB": {"1g.12gb": (12, 1, 1, 7), "1g.24gb": (24, 1, 2, 4), "2g.24gb": (24, 2, 2, 3),
                   "3g.48gb": (48, 3, 4, 2), "4g.48gb": (48, 4, 4, 1), "7g.96gb": (96, 7, 8, 1)},
    "GH200-144GB": {"1g.18gb": (18, 1, 1, 7), "1g.36gb": (36, 1, 2, 4), "2g.36gb": (36, 2, 2, 3),
                    "3g.72gb": (72, 3, 4, 2), "4g.72gb": (72, 4, 4, 1), "7g.144gb": (144, 7, 8, 1)},
    "B200-180GB": {"1g.23gb": (23, 1, 1, 7), "1g.45gb": (45, 1, 2, 4), "2g.45gb": (45, 2, 2, 3),
                   "3g.90gb": (90, 3, 4, 2), "4g.90gb": (90, 4, 4, 1), "7g.180gb": (180, 7, 8, 1)},
}
MEMORY_GIB = {"A30-24GB": 24, "A100-40GB": 40, "A100-80GB": 80, "H100-80GB": 80, "H100-94GB": 94, "H200-141GB": 141,
              "GH200-96GB": 96, "GH200-144GB": 144, "B200-180GB": 180}


def test_the_table_names_its_source():
    assert "Multi-Instance GPU User Guide" in MIG_SOURCE and "r580" in MIG_SOURCE


@pytest.mark.parametrize("model", EXPECTED)
def test_each_card_has_its_profiles(model):
    card = mig_card(model)
    assert card is not None and card.model == model
    assert {p.name: (p.memory_gb, p.compute_slices, p.memory_slices, p.max_instances)
            for p in card.profiles} == EXPECTED[model]
    for p in card.profiles:
        assert p.name == f"{p.compute_slices}g.{p.memory_gb}gb"
        assert MIG_PROFILES[p.name][0] == p.compute_slices


def test_every_card_of_the_table_is_tested():
    assert {c.model for c in MIG_CARDS} == set(EXPECTED)


@pytest.mark.parametrize("model", [m for m in EXPECTED if m != "A30-24GB"])
def test_a_seven_slice_card_packs_seven_1g_instances_and_no_eighth(model):
    card = mig_card(model)
    smallest = card.profiles[0].name
    assert card.compute_slices == 7
    assert layout_errors(card, [smallest] * 7) == []
    assert [code for code, _ in layout_errors(card, [smallest] * 8)] == ["compute_slices", "too_many"]
    whole = card.profiles[-1].name
    assert layout_errors(card, [whole]) == [] and layout_errors(card, [whole, smallest]) != []


def test_the_a30_has_four_slices():
    card = mig_card("A30-24GB")
    assert layout_errors(card, ["1g.6gb"] * 4) == [] and layout_errors(card, ["2g.12gb", "1g.6gb", "1g.6gb"]) == []
    assert layout_errors(card, ["2g.12gb", "2g.12gb", "1g.6gb"]) != []


def test_a_layout_must_fit_the_memory_slices_too():
    card = mig_card("H100-80GB")   # 3g + 3g + 1g: 7 compute slices but 9 memory slices
    assert [code for code, _ in layout_errors(card, ["3g.40gb", "3g.40gb", "1g.10gb"])] == ["memory_slices"]


def test_cards_are_found_by_alias_and_by_bare_family_name_with_memory():
    assert mig_card("h200-141gb").model == "H200-141GB"
    assert mig_card("B200-192GB").model == "B200-180GB"     # the platform's other spelling of the B200
    assert mig_card("H200", 141 * 1024).model == "H200-141GB"
    assert mig_card("GH200", 96 * 1024).model == "GH200-96GB"
    assert mig_card("GH200", 144 * 1024).model == "GH200-144GB"
    assert mig_card("L40S-48GB", 48 * 1024) is None and mig_card("RTX-4090-24GB") is None


def pool(model, layout, gib=None):
    return NodePool(name="p", vendor=Vendor.NVIDIA, gpu_model=model, sharing=PoolSharing.MIG,
                    gpu_memory_mib=(gib or MEMORY_GIB.get(model, 48)) * 1024, mig_layout=layout)


@pytest.mark.parametrize("model", EXPECTED)
def test_a_mig_pool_of_every_card_is_accepted(model):
    card = mig_card(model)
    layout = [card.profiles[0].name] * (card.compute_slices if model != "A30-24GB" else 4)
    pool(model, layout).clean()   # no ValidationError
    pool(model, [card.profiles[-1].name]).clean()


def test_an_h200_pool_accepts_mig():
    """The measured defect: an H200 pool was refused as having no MIG profiles."""
    pool("H200-141GB", ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]).clean()
    pool("H200", ["7g.141gb"], gib=141).clean()


@pytest.mark.parametrize(("model", "layout", "says"), [
    ("L40S-48GB", ["1g.10gb"], "has no MIG profiles"),
    ("H200-141GB", ["3g.40gb"], "are not profiles of H200-141GB"),
    ("A30-24GB", ["4g.24gb", "1g.6gb"], "compute slices"),
    ("H100-80GB", ["1g.20gb"] * 5, "at most 4"),
])
def test_a_layout_the_card_cannot_hold_is_refused(model, layout, says):
    with pytest.raises(ValidationError) as caught:
        pool(model, layout).clean()
    assert says in " ".join(caught.value.message_dict["mig_layout"])


DEVICE = Path(__file__).resolve().parents[2] / "data" / "device"


def _nvml_profiles():
    """The MIG profiles NVML listed on a real H200 (driver 580.159.04): name -> the reading."""
    reading = json.loads((DEVICE / "nvml_device.json").read_text())
    return {p["name"].removeprefix("MIG "): p for p in reading["mig_profiles"] if "name" in p}


def test_the_h200_matches_what_nvml_read_on_a_real_h200():
    """The defect: memory was taken from the name (1g.18gb -> 18432 MiB) while an instance has 16384."""
    card = mig_card("H200-141GB")
    listed = _nvml_profiles()
    assert len(listed) == 7 and "1g.18gb" in listed
    for name, read in listed.items():
        if name.endswith("+me"):
            # left out on purpose: the plain profile's memory and SMs plus media engines, one per GPU
            assert card.profile(name) is None and read["instances"] == 1
            plain = listed[name.removesuffix("+me")]
            assert (read["memory_mb"], read["slices"], read["sms"]) == (plain["memory_mb"], plain["slices"],
                                                                         plain["sms"])
            continue
        p = card.profile(name)
        assert p is not None, name
        assert (p.memory_mib, p.compute_slices, p.max_instances) == (read["memory_mb"], read["slices"],
                                                                     read["instances"]), name
    assert set(card.names) == {n for n in listed if not n.endswith("+me")}
    # the lgip text the same run saved says the same, in GiB
    lgip = (DEVICE / "mig_lgip.txt").read_text()
    for name, read in listed.items():
        assert re.search(rf"MIG {re.escape(name)}\s+\d+\s+\d+/\d+\s+{read['memory_mb'] / 1024:.2f}\s", lgip), name


def test_memory_per_instance_is_never_above_the_name_and_shared_names_take_the_smallest():
    for card in MIG_CARDS:
        for p in card.profiles:
            assert 0 < p.memory_mib < p.memory_gb * 1024, (card.model, p.name)
            assert MIG_PROFILES[p.name] == (p.compute_slices, min(
                q.memory_mib for c in MIG_CARDS for q in c.profiles if q.name == p.name))
    assert MIG_PROFILES["1g.18gb"] == (1, 16384)        # H200 16.00 GiB, not the GH200-144GB's 17.50


@pytest.mark.parametrize(("nvml_name", "memory_mib", "card"), [
    ("NVIDIA H200", 143771, "H200-141GB"),  # as read on the lent H200 (tests/data/device/)
    ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
    ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
    ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"),
    ("NVIDIA A30", 24576, "A30-24GB"),
    ("NVIDIA L4", 23034, None),  # no MIG
])
def test_nvml_device_names_find_their_card_by_family_and_memory(nvml_name, memory_mib, card):
    found = mig_card(nvml_name, memory_mib)
    assert (found.model if found else None) == card
