"""Run playbooks/validate.yml for real against inventories written by the test (controller only)."""

import itertools
import subprocess

import pytest
import yaml
from conftest import ROOT, ansible_env, run_playbook, tool, write_inventory

GATEWAY_KEY = "sk-9c1f4e7a2b8d6053f1e9a7c4b2d8e6f0a3c5"


def run_validate(tmp_path, inventory, group_vars=None):
    # The default serving plan (the notes' model behind the gateway) unless a test overrides it.
    all_vars = {
        "k3s_token": "0123456789abcdef0123456789abcdef-test",
        "k3s_agent_token": "fedcba9876543210fedcba9876543210-agent",
        "litellm_master_key": GATEWAY_KEY,
        "monitoring_grafana_admin_password": "Jq7vX2mL9cR4tW8zB5nK",
    }
    all_vars.update(group_vars or {})
    return run_playbook("validate.yml", write_inventory(tmp_path / "inv", inventory, all_vars), callback="default")[0]


ADDRESSES = itertools.count(2)  # distinct loopback addresses, so no duplicate-IP problem is reported


def hosts(*names):
    # Any connection attempt would run /bin/false instead of ssh and show as unreachable: no traffic at all.
    return {
        "hosts": {
            n: {"ansible_host": f"127.0.0.{next(ADDRESSES)}", "ansible_ssh_executable": "/bin/false"} for n in names
        }
    }


@pytest.mark.slow
def test_sound_inventory_passes_without_touching_hosts(tmp_path):
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("gamorcloud01"),
                "k3s_agents": hosts("gx10-db4d"),
                "gpu_nodes": hosts("gx10-db4d"),
            }
        }
    }
    proc = run_validate(tmp_path, inv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Inventory sound: 1 server(s), 1 agent(s), 1 GPU node(s)" in proc.stdout
    recap = proc.stdout.split("PLAY RECAP")[1]
    assert "unreachable=0" in recap and "unreachable=1" not in recap  # no host was contacted


@pytest.mark.slow
def test_every_problem_reported_at_once_with_custom_group_names(tmp_path):
    inv = {"all": {"children": {"cp": hosts("cp-1", "cp-2"), "workers": hosts("w_1"), "accel": hosts("gpu-9")}}}
    proc = run_validate(
        tmp_path,
        inv,
        {"aiinfra_server_group": "cp", "aiinfra_agent_group": "workers", "aiinfra_gpu_group": "accel"},
    )
    assert proc.returncode != 0
    out = proc.stdout
    assert "The inventory has 3 problem(s)" in out, out
    assert "cp-1,cp-2: aiinfra_server_group" in out
    assert "gpu-9: aiinfra_gpu_group" in out
    assert "w_1: inventory_hostname" in out


@pytest.mark.slow
def test_impossible_model_plan_is_reported_with_the_other_problems(tmp_path):
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("cp-1", "cp-2"),
                "k3s_agents": hosts("gx10-db4d"),
                "gpu_nodes": {"hosts": {"gx10-db4d": {"aiinfra_gpu_count": 1}}},
            }
        }
    }
    model = {"served_name": "big", "path": "m", "tensor_parallel_size": 2, "image": "vllm/vllm-openai:latest"}
    proc = run_validate(tmp_path, inv, {"vllm_models": [model]})
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    # One finding per cause (issue 29 item 14): the TP mistake is not also counted as a cluster-wide GPU shortage.
    assert "The inventory has 3 problem(s)" in out, out
    assert "cp-1,cp-2: aiinfra_server_group: 2 servers" in out
    assert "the models request 2 GPUs in all but the cluster has 1" not in out
    assert "big: tensor_parallel_size 2 is larger than the GPUs of any node (at most 1)" in out
    assert "big: image 'vllm/vllm-openai:latest' is not pinned" in out


@pytest.mark.slow
def test_first_server_is_the_first_in_inventory_order(tmp_path):
    """group_by results arrive in any order; the server that initialises the cluster must not."""
    servers = [f"cp-{n}" for n in (7, 3, 5, 1, 6, 2, 4)]
    inv = write_inventory(tmp_path / "inv", {"all": {"children": {"k3s_servers": hosts(*servers)}}})
    playbook = tmp_path / "check.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {"import_playbook": str(ROOT / "playbooks" / "groups.yml")},
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.assert": {
                                "that": [
                                    "groups['__aiinfra_first_server'] == ['cp-7']",
                                    "groups['__aiinfra_servers'] | sort == groups['k3s_servers'] | sort",
                                ]
                            }
                        }
                    ],
                },
            ]
        )
    )
    for _attempt in range(3):
        proc = subprocess.run(
            [tool("ansible-playbook"), str(playbook), "-i", str(inv), "--forks", "7"],
            capture_output=True,
            text=True,
            env=ansible_env("default"),
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-2000:]


@pytest.mark.slow
def test_serving_problems_are_reported_together(tmp_path):
    """GPU Operator, NIM, plan and gateway problems come out in one report, keys never quoted."""
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("cp-1"),
                "k3s_agents": hosts("gpu-1"),
                "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_count": 2, "aiinfra_gpu_class": "shared"}}},
            }
        }
    }
    weak = "sk-1234"
    nim = {"served_name": "llama", "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", "replicas": 1}
    proc = run_validate(
        tmp_path,
        inv,
        {
            "litellm_master_key": weak,
            "gpu_operator_time_slicing_classes": {"exclusive": 1},
            "nim_models": [nim],
        },
    )
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    for fragment in (
        "gpu-1: GPU class 'shared' is not in gpu_operator_time_slicing_classes",
        "nim_models is set but nim_ngc_api_key is empty",
        "llama: a NIM backend needs at least 2 replicas",
        "litellm_master_key has 4 characters after sk-, fewer than 32",
        "litellm_master_key contains a well-known placeholder word",
    ):
        assert fragment in out, (fragment, out[-3000:])
    assert weak not in out


SOUND = {
    "all": {
        "children": {
            "k3s_servers": hosts("gamorcloud01"),
            "k3s_agents": hosts("gx10-db4d"),
            "gpu_nodes": hosts("gx10-db4d"),
        }
    }
}
SECRETS = {
    "k3s_token": "0123456789abcdef0123456789abcdef-test",
    "k3s_agent_token": "fedcba9876543210fedcba9876543210-agent",
    "litellm_master_key": GATEWAY_KEY,
    "monitoring_grafana_admin_password": "Jq7vX2mL9cR4tW8zB5nK",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("playbook", "extra", "message"),
    [
        # --limit leaves the controller out: its plays would be skipped and the hosts reached unchecked.
        ("site.yml", ["--limit", "gx10-db4d"], "The inventory validation (validate.yml) did not run on the controller"),
        ("upgrade.yml", ["--limit", "gx10-db4d"], "The inventory validation (validate.yml) did not run"),
        ("reset.yml", ["--limit", "gx10-db4d"], "Re-run with -e k3s_reset_confirm=yes-reset-k3s-on-k3s"),
        ("drill.yml", ["--limit", "gx10-db4d"], "The drill (drill.yml runs on the controller) did not run"),
        # --tags that select no guard task: the guards are tagged always.
        ("reset.yml", ["--tags", "k3s"], "Re-run with -e k3s_reset_confirm=yes-reset-k3s-on-k3s"),
        ("reset.yml", ["--limit", "gamorcloud01", "--tags", "k3s"], "Re-run with -e k3s_reset_confirm"),
    ],
)
def test_guards_hold_under_limit_and_tags(tmp_path, playbook, extra, message):
    inventory = write_inventory(tmp_path / "inv", SOUND, SECRETS)
    proc = run_playbook(playbook, inventory, callback="default", extra=extra)[0]
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, text[-3000:]
    assert message in text, text[-3000:]
    assert "unreachable=1" not in proc.stdout.split("PLAY RECAP")[-1], text[-3000:]  # no host was contacted


@pytest.mark.slow
def test_site_with_tags_still_validates_first(tmp_path):
    """--tags k3s on an inventory that cannot work: the validation still runs and stops the run."""
    broken = {"all": {"children": {"k3s_servers": hosts("cp-1", "cp-2"), "k3s_agents": hosts("w-1")}}}
    inventory = write_inventory(tmp_path / "inv", broken, SECRETS)
    proc = run_playbook("site.yml", inventory, callback="default", extra=["--tags", "k3s"])[0]
    text = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "The inventory has" in text and "problem(s)" in text, text[-3000:]
    assert "unreachable=1" not in proc.stdout.split("PLAY RECAP")[-1]


SPEC_SITE = {
    "all": {
        "children": {
            "k3s_servers": {"hosts": {"cp-1": {"ansible_host": "192.0.2.10", "ansible_ssh_executable": "/bin/false"}}},
            "k3s_agents": {"hosts": {"gpu-1": {"ansible_host": "192.0.2.11", "ansible_ssh_executable": "/bin/false"}}},
            "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_count": 1}}},
        }
    }
}


@pytest.mark.slow
def test_variables_that_cannot_work_are_refused_all_at_once_without_a_traceback(tmp_path):
    inv = yaml.safe_load(yaml.safe_dump(SPEC_SITE))
    inv["all"]["children"]["gpu_nodes"]["hosts"]["gpu-1"] = {"aiinfra_gpu_count": "two", "k3s_node_ip": "127.0.0.1"}
    proc = run_validate(
        tmp_path,
        inv,
        {
            "k3s_gpu_node_taints": ["nvidia.com/gpu=present:NoSchedul"],
            "k3s_registration_address": "https://192.0.2.10:6443",
            "aiinfra_namespace": "IA_Services",
            "vllm_models": [{"served_name": "qwen", "path": "Qwen/Qwen2-7B", "tensor_paralel_size": 2, "replicas": 0}],
        },
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Traceback" not in out and "AnsibleFilterError" not in out and "Unexpected" not in out, out
    assert "The inventory has 7 problem(s)" in out, out
    for fragment in (
        "[gpu-1] aiinfra_gpu_count - aiinfra_gpu_count is 'two', not a whole number",
        "[gpu-1] k3s_node_ip - k3s_node_ip is 127.0.0.1",
        "did you mean NoSchedule?",
        "k3s_registration_address is 'https://192.0.2.10:6443'",
        "aiinfra_namespace is 'IA_Services'",
        "rename it to tensor_parallel_size",
        "vllm_models[0].replicas is 0",
    ):
        assert fragment in out.replace("\n        ", " "), fragment
    assert "unreachable=1" not in out  # no host was contacted


@pytest.mark.slow
def test_a_misspelt_variable_is_an_error_and_names_the_known_one(tmp_path):
    """Issue 29 item 9: traefik_path_prefx passed validate with a warning while the site used the default prefix."""
    proc = run_validate(tmp_path, SPEC_SITE, {"traefik_path_prefx": "/v1", "site_dns_zone": "example.internal"})
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0, out[-3000:]
    assert "ERROR UNKNOWN_VARIABLE [cp-1,gpu-1] traefik_path_prefx" in out, out[-3000:]
    assert "did you mean traefik_path_prefix?" in out and "rename traefik_path_prefx to traefik_path_prefix" in out
    # A name close to no known variable (an operator's own) is printed as a warning and does not fail the run.
    assert "WARNING UNKNOWN_VARIABLE [cp-1,gpu-1] site_dns_zone" in out, out[-3000:]
    assert "The inventory has 1 problem(s)" in out, out[-3000:]


@pytest.mark.slow
def test_a_variable_close_to_no_known_one_only_warns(tmp_path):
    proc = run_validate(tmp_path, SPEC_SITE, {"site_dns_zone": "example.internal"})
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, out[-3000:]
    assert "WARNING UNKNOWN_VARIABLE [cp-1,gpu-1] site_dns_zone" in out
    assert "Not checked without facts" in out


@pytest.mark.slow
def test_a_key_typo_hides_no_other_problem(tmp_path):
    """Issue 29 item 11: one run reports the argument-spec problems (a model key typo, a misspelt variable), the
    group problems and the site plan's problems together, then fails once."""
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("cp-1", "cp-2"),
                "k3s_agents": hosts("gpu-1"),
                "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_count": 2, "aiinfra_gpu_class": "shared"}}},
            }
        }
    }
    model = {
        "served_name": "qwen",
        "path": "Qwen/Qwen2.5-7B-Instruct",
        "tensor_paralel_size": 2,
        "image": "vllm/vllm-openai:latest",
    }
    proc = run_validate(
        tmp_path,
        inv,
        {
            "vllm_models": [model],
            "traefik_rate_limt_burst": 10,
            "litellm_master_key": "sk-1234",
            "gpu_operator_time_slicing_classes": {"exclusive": 1},
            "traefik_host": "api.example.internal",
            "traefik_path_prefix": "/v1",
        },
    )
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "Traceback" not in out and "could not be" not in out, out[-4000:]
    for fragment in (
        "ERROR UNKNOWN_KEY [cp-1,cp-2,gpu-1] vllm_models[0]",  # the key typo
        "rename it to tensor_parallel_size",
        "ERROR UNKNOWN_VARIABLE [cp-1,cp-2,gpu-1] traefik_rate_limt_burst",  # a misspelt variable
        "cp-1,cp-2: aiinfra_server_group: 2 servers",  # the groups
        "gpu-1: GPU class 'shared' is not in gpu_operator_time_slicing_classes",  # the plan
        "qwen: image 'vllm/vllm-openai:latest' is not pinned",
        "litellm_master_key has 4 characters after sk-",
        "traefik_path_prefix is '/v1' and the public paths already start with it",  # the edge
    ):
        assert fragment in out, (fragment, out[-4000:])
    assert out.count("TASK [Report every problem of the inventory at once]") == 1
    assert out.count("fatal:") == 1  # one failure, at the end


@pytest.mark.slow
def test_a_check_that_cannot_run_is_reported_with_the_others(tmp_path):
    """A value of the wrong type that a role's own argument spec refuses no longer stops the run before the other
    checks: the type problem, the check that could not run and the other problems come out together."""
    inv = yaml.safe_load(yaml.safe_dump(SPEC_SITE))
    inv["all"]["children"]["k3s_servers"]["hosts"]["cp-2"] = {"ansible_host": "192.0.2.12"}
    proc = run_validate(tmp_path, inv, {"k3s_server_extra_config": ["not", "a", "mapping"]})
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "ERROR TYPE [cp-1,cp-2,gpu-1] k3s_server_extra_config" in out, out[-4000:]
    assert "ERROR CHECK [all] k3s - the K3s settings could not be checked" in out, out[-4000:]
    assert "cp-1,cp-2: aiinfra_server_group: 2 servers" in out, out[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize(("gib", "refused"), [(30, True), (8, False)])
def test_weights_in_the_seed_directory_are_measured_against_the_gpu_memory(tmp_path, gib, refused):
    """The site plan measures the weight files seeded from the controller (sparse files here: the size counts, not
    the blocks) and refuses a model whose weights leave a 24 GB GPU no room for the KV cache."""
    model = tmp_path / "seed" / "org" / "big"
    model.mkdir(parents=True)
    with open(model / "model-00001.safetensors", "wb") as handle:
        handle.truncate(gib * 1024**3)
    (model / "config.json").write_text("{}")  # not a weight file
    inv = {
        "all": {
            "children": {
                "k3s_servers": hosts("cp-1"),
                "k3s_agents": hosts("gpu-1"),
                "gpu_nodes": {"hosts": {"gpu-1": {"aiinfra_gpu_memory_mib": 23034}}},
            }
        }
    }
    proc = run_validate(
        tmp_path,
        inv,
        {
            "vllm_models": [{"served_name": "big", "path": "org/big"}],
            "model_registry_seed_dir": str(tmp_path / "seed"),
            "model_registry_seed_models": ["org/big"],
        },
    )
    if refused:
        assert proc.returncode != 0
        assert "ERROR SERVING_PLAN [all] vllm_models - big: %.1f GiB of weights" % gib in proc.stdout, proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout
