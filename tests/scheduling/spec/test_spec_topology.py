"""The spec's `topology` field: read, written back, and refused with a field error when wrong."""

from __future__ import annotations

import pytest

from scheduling.spec import ClusterInfo, PoolInfo, SpecError, parse_job_spec, spec_to_dict
from scheduling.spec.model import TopologySpec
from scheduling.spec.requests import job_topology

R = "name: j\nroles:\n  - name: main\n    image: img:1\n    replicas: {min: 4, max: 4}\n"
RACKS = ClusterInfo(pools=(PoolInfo("h100", "nvidia", "H100-80GB", 81920, 8,
                                    topology_levels=("example.com/block", "topology.kubernetes.io/rack")),))


@pytest.mark.parametrize(("field", "expected"), [
    ("topology: {required: rack}", TopologySpec("rack", True)),
    ("topology: {preferred: rack}", TopologySpec("rack", False)),
    ("topology: {required: topology.kubernetes.io/rack}", TopologySpec("topology.kubernetes.io/rack", True)),
    ("topology: {preferred: nvlink-domain}", TopologySpec("nvlink-domain", False)),
])
def test_topology_is_read_and_written_back(field, expected):
    spec = parse_job_spec(R + field + "\n")
    assert spec.topology == expected
    assert spec_to_dict(spec)["topology"] == expected.to_dict()
    assert parse_job_spec(R + field + "\n") == spec


def test_no_topology_is_none_and_not_written():
    spec = parse_job_spec(R)
    assert spec.topology is None
    assert "topology" not in spec_to_dict(spec)


@pytest.mark.parametrize(("field", "where", "message"), [
    ("topology: rack", "topology",
     "topology must be a mapping of required or preferred and a level, e.g. {required: rack}, not 'rack'"),
    ("topology: {}", "topology", "topology needs one of required or preferred, e.g. {required: rack}"),
    ("topology: {required: rack, preferred: block}", "topology.preferred",
     "topology takes required or preferred, not both"),
    ("topology: {requird: rack}", "topology.requird",
     "unknown field 'requird' in topology; did you mean 'required'?"),
    ("topology: {required: 'ra ck'}", "topology.required",
     "topology.required 'ra ck' is not valid: a topology level such as rack, block, nvlink-domain or node, "
     "or its label key"),
    ("topology: {required: 3}", "topology.required", "topology.required must be text, not 3"),
    ("topology: {preferred: ''}", "topology.preferred", "topology.preferred is empty"),
])
def test_bad_topology_is_a_field_error(field, where, message):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(R + field + "\n")
    assert [(e.field, e.message) for e in caught.value.errors] == [(where, message)]
    assert caught.value.errors[0].line == 6


def test_level_no_pool_has_is_refused_naming_the_levels():
    assert parse_job_spec(R + "topology: {required: rack}\n", cluster=RACKS).topology.level == "rack"
    assert parse_job_spec(R + "topology: {required: node}\n", cluster=RACKS).topology.level == "node"
    with pytest.raises(SpecError) as caught:
        parse_job_spec(R + "topology: {required: rak}\n", cluster=RACKS)
    (issue,) = caught.value.errors
    assert issue.field == "topology"
    assert issue.message == "no pool has the topology level 'rak' (levels: block, node, rack); did you mean 'rack'?"


def test_the_job_takes_the_spec_topology_else_the_quote_option():
    asked = parse_job_spec(R + "topology: {preferred: rack}\n")
    assert job_topology(asked, {"topology": {"required": "block"}}) == {"preferred": "rack"}
    plain = parse_job_spec(R)
    assert job_topology(plain, {"topology": {"required": "rack"}}) == {"required": "rack"}
    assert job_topology(plain, {"pool": "h100"}) == {}
    assert job_topology(plain, None) == {}
