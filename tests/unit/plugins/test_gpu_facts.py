"""gpu_facts against recorded nvidia-smi outputs, mocked at the process boundary (get_bin_path, run_command); a
driver container's root is a real temporary directory."""

import pytest
import yaml
from conftest import ROOT, load_cases

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu import facts as gf
from ansible_collections.aiinfra.k3s.plugins.modules import gpu_facts as module

HOST_BINARIES = {"nvidia-smi": "/usr/bin/nvidia-smi", "chroot": "/usr/sbin/chroot"}


class FailJson(Exception):
    """AnsibleModule.run_command's answer to an executable that is not there: fail_json, the task fails."""


class FakeModule:
    """The two process-boundary calls the module makes: get_bin_path and run_command."""

    def __init__(self, case, driver_root=""):
        self.case = case
        self.params = {
            "nvidia_smi": case.get("nvidia_smi", "nvidia-smi"),
            "driver_root": driver_root,
            "expect_gpus": False,
        }
        self.commands = []
        self.smi = [HOST_BINARIES["nvidia-smi"]]
        if "argv" in case:
            self.smi = [arg.replace("{driver_root}", driver_root) for arg in case["argv"]]

    def get_bin_path(self, name):
        if name == "nvidia-smi" and self.case.get("missing"):
            return None
        return HOST_BINARIES.get(name)

    def run_command(self, argv):
        self.commands.append(argv)
        if argv[0] not in HOST_BINARIES.values():
            # what AnsibleModule.run_command does when the executable does not exist
            raise FailJson("[Errno 2] No such file or directory: %r" % argv[0])
        if argv[: len(self.smi)] != self.smi:
            raise AssertionError("unexpected command %r (nvidia-smi should run as %r)" % (argv, self.smi))
        args = argv[len(self.smi) :]
        if args == gf.QUERY_ARGS:
            return self.case.get("rc", 0), self.case["query"], ""
        if args == ["-L"]:
            return 0, self.case.get("list", ""), ""
        if args == ["-q"]:
            return 0, self.case.get("q", ""), ""
        raise AssertionError("unexpected command %r" % argv)


def driver_root(case, tmp_path):
    """The driver container's root for a case that has one: a directory holding the files it lists."""
    if "driver_root" not in case:
        return ""
    root = tmp_path / "run-nvidia-driver"
    root.mkdir()
    for name in case["driver_root"]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return str(root)


@pytest.mark.parametrize("case", load_cases("nvidia_smi"))
def test_recorded_outputs(case, tmp_path):
    fake = FakeModule(case, driver_root(case, tmp_path))
    facts = module.read_facts(fake)
    for key, value in case["expect"].items():
        assert facts[key] == value, (key, facts["message"])
    if "message" in case:
        assert case["message"] in facts["message"], facts["message"]
    if facts["status"] == "ok":
        assert facts["count"] == len(facts["gpus"])
    # -L is only asked for when some GPU has MIG enabled.
    assert ([*fake.smi, "-L"] in fake.commands) == bool(case["expect"].get("mig_enabled"))


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


@pytest.mark.parametrize(
    ("inventory", "root"),
    [
        ({}, ""),
        ({"gpu_operator_driver_enabled": True}, "/run/nvidia/driver"),
        ({"gpu_operator_driver_enabled": "true", "gpu_operator_enabled": False}, ""),
        ({"gpu_operator_driver_enabled": False}, ""),
    ],
)
def test_gpu_verify_reads_the_driver_container_where_the_operator_owns_the_driver(inventory, root):
    """The site plan decides where nvidia-smi is read (the GPU Operator's driver container when it installs the
    driver), and gpu_verify's default driver root is the plan's."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.site_plan import gpu_operator_plan

    plan = {"gpu_operator": gpu_operator_plan(inventory)}
    defaults = yaml.safe_load((ROOT / "roles" / "gpu_verify" / "defaults" / "main.yml").read_text())
    templar = Templar(loader=DataLoader(), variables={"site_plan_current": plan})
    assert templar.template(trust_as_template(defaults["gpu_verify_driver_root"])) == root
