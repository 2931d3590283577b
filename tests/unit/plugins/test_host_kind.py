import pytest
from ansible.errors import AnsibleFilterError
from conftest import load_cases

from ansible_collections.aiinfra.k3s.plugins.filter.host_kind import FilterModule
from ansible_collections.aiinfra.k3s.plugins.module_utils.node.host_kind import host_kind


@pytest.mark.parametrize("case", load_cases("host_kind"))
def test_host_kind(case):
    assert host_kind(case["facts"], case.get("override", "auto")) == case["expected"]


def test_filter_is_registered_and_rejects_bad_override():
    flt = FilterModule().filters()["host_kind"]
    assert flt({"virtualization_role": "guest", "virtualization_type": "podman"}) == "container"
    with pytest.raises(AnsibleFilterError, match="override must be one of"):
        flt({}, "kvm")
