"""gpu_facts against recorded nvidia-smi outputs, mocked at the run_command boundary."""

import pytest
from conftest import load_cases

from ansible_collections.aiinfra.k3s.plugins.module_utils import gpu_facts as gf
from ansible_collections.aiinfra.k3s.plugins.modules import gpu_facts as module


class FakeModule:
    """The two process-boundary calls the module makes: get_bin_path and run_command."""

    def __init__(self, case):
        self.case = case
        self.params = {"nvidia_smi": "nvidia-smi", "expect_gpus": False}
        self.commands = []

    def get_bin_path(self, name):
        return None if self.case.get("missing") else "/usr/bin/nvidia-smi"

    def run_command(self, argv):
        self.commands.append(argv)
        if argv[1:] == gf.QUERY_ARGS:
            return self.case.get("rc", 0), self.case["query"], ""
        if argv[1:] == ["-L"]:
            return 0, self.case.get("list", ""), ""
        if argv[1:] == ["-q"]:
            return 0, self.case.get("q", ""), ""
        raise AssertionError("unexpected command %r" % argv)


@pytest.mark.parametrize("case", load_cases("nvidia_smi"))
def test_recorded_outputs(case):
    fake = FakeModule(case)
    facts = module.read_facts(fake)
    for key, value in case["expect"].items():
        assert facts[key] == value, key
    if "message" in case:
        assert case["message"] in facts["message"]
    if facts["status"] == "ok":
        assert facts["count"] == len(facts["gpus"])
    # -L is only asked for when some GPU has MIG enabled.
    assert (["/usr/bin/nvidia-smi", "-L"] in fake.commands) == bool(case["expect"].get("mig_enabled"))


def test_mig_devices_are_attached_to_their_gpu():
    case = next(c.values[0] for c in load_cases("nvidia_smi") if c.id == "a100-mig-enabled")
    facts = gf.build_facts(case["query"], case["list"], case["q"])
    assert [d["gpu_index"] for d in facts["mig_devices"]] == [0, 0, 0, 0]
    assert facts["mig_devices"][0] == {
        "gpu_index": 0,
        "gpu_uuid": "GPU-7c3b2a10-1111-4222-8333-444455556666",
        "profile": "3g.40gb",
        "index": 0,
        "uuid": "MIG-1a2b3c4d-0000-5000-9000-000000000000",
    }
    assert facts["gpus"][0]["mig_mode"] == "enabled" and facts["gpus"][1]["mig_mode"] == "disabled"


def test_malformed_query_line_is_an_error():
    with pytest.raises(gf.GpuFactsError, match="unexpected nvidia-smi query line"):
        gf.parse_query("0, GPU-x, NVIDIA L4\n")


def test_mixed_driver_versions_are_all_reported():
    out = (
        "0, GPU-a, NVIDIA L4, 23034, [N/A], 550.54.15, 00000000:01:00.0\n"
        "1, GPU-b, NVIDIA L4, 23034, [N/A], 550.90.07, 00000000:02:00.0\n"
    )
    assert gf.build_facts(out)["driver_version"] == ["550.54.15", "550.90.07"]


def test_expected_from_facts_uses_node_names_and_skips_unreadable_hosts():
    ok = gf.build_facts(
        "0, GPU-a, NVIDIA A100-SXM4-80GB, 81920, Enabled, 535.183.01, 00000000:07:00.0\n",
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-a)\n  MIG 1g.10gb     Device  0: (UUID: MIG-1)\n"
        "  MIG 1g.10gb     Device  1: (UUID: MIG-2)\n",
    )
    facts = {
        "gx10-db4d": {"nodename": "gx10-db4d.lan", "aiinfra_gpus": ok},
        "lab-gpu-1": {"nodename": "lab-gpu-1", "aiinfra_gpus": gf.empty_facts("no_nvidia_smi", "none")},
        "not-gathered": {},
    }
    assert gf.expected_from_facts(facts) == {"gx10-db4d.lan": {"physical": 1, "mig_slices": 2, "mig_gpus": 1}}
