"""plugins/module_utils/plan/inventory_spec.py with the roles' real argument specs (cases in data/inventory_spec.yml)."""

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.aiinfra.k3s.plugins.filter.inventory_spec_problems import role_specs
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import inventory_spec

CASES = yaml.safe_load((Path(__file__).parents[1] / "data" / "inventory_spec.yml").read_text())
SPECS = inventory_spec.merge_specs(role_specs())


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_spec_problems(case):
    declared = {host: list(values) for host, values in case["vars"].items()}
    problems = inventory_spec.spec_problems(SPECS, case["vars"], declared)
    assert sorted([p["code"], p["variable"]] for p in problems) == sorted(case["expect"]), problems
    for p in problems:
        assert p["severity"] == ("warning" if p["variable"] in case.get("warnings", []) else "error"), p
        assert (p["host"] and p["fix"] and p["variable"] in p["problem"]) or p["code"] == "SAME_MACHINE"


@pytest.mark.parametrize(
    "name, value",
    [("k3s_token", ["s3cr3t-value-in-a-list"]), ("k3s_agent_token", {"k": "s3cr3t-value-in-a-map"}),
     ("k3s_registries", ["s3cr3t-value-in-a-list"]), ("litellm_master_key", ["s3cr3t-value-in-a-list"])],
)  # fmt: skip
def test_a_secret_of_the_wrong_type_is_reported_without_its_value(name, value):
    assert SPECS[name].get("no_log") is True
    (problem,) = inventory_spec.spec_problems(SPECS, {"cp-1": {name: value}}, {"cp-1": [name]})
    assert problem["code"] == "TYPE" and name in problem["problem"]
    assert "s3cr3t" not in repr(problem), problem


def test_a_misspelt_variable_is_an_error_naming_the_known_one():
    (error,) = inventory_spec.spec_problems(SPECS, {"cp-1": {}}, {"cp-1": ["k3s_verison"]})
    assert error["severity"] == "error" and "did you mean k3s_version?" in error["problem"]
    assert error["fix"] == "rename k3s_verison to k3s_version"


def test_a_misspelt_top_level_variable_of_the_issue_is_an_error():
    """Issue 29 item 9: traefik_path_prefx was a warning and validate passed with the default prefix."""
    (error,) = inventory_spec.spec_problems(SPECS, {"cp-1": {}}, {"cp-1": ["traefik_path_prefx"]})
    assert error["severity"] == "error" and error["variable"] == "traefik_path_prefx"
    assert "did you mean traefik_path_prefix?" in error["problem"]
    line = inventory_spec.render(error)
    assert line.startswith("ERROR UNKNOWN_VARIABLE [cp-1] traefik_path_prefx - ") and "rename" in line


def test_a_variable_close_to_no_known_one_is_a_warning():
    (warning,) = inventory_spec.spec_problems(SPECS, {"cp-1": {}}, {"cp-1": ["site_dns_zone"]})
    assert warning["severity"] == "warning" and "did you mean" not in warning["problem"]


def test_every_extra_variable_the_playbooks_name_is_known():
    """The -e variables the playbooks and docs name are declared by a role or listed as the playbooks' own, so that
    running a playbook with them is no unknown-variable problem."""
    root = Path(__file__).parents[3]
    texts = [p.read_text() for p in [*root.glob("playbooks/*.yml"), root / "README.md", *root.glob("docs/*.md")]]
    names = {n for text in texts for n in re.findall(r"-e ([a-z][a-z0-9_]*)=", text)}
    assert {"render_dir", "render_secrets", "consumers_rotate"} <= names
    for name in sorted(names):
        assert inventory_spec.unknown_variable_problems("localhost", [name], SPECS) == [], name


def test_a_misspelt_model_key_names_the_known_one():
    models = [{"served_name": "m", "path": "p", "tensor_paralel_size": 2}]
    (problem,) = inventory_spec.spec_problems(SPECS, {"cp-1": {"vllm_models": models}}, {})
    assert problem["fix"] == "rename it to tensor_parallel_size"


@pytest.mark.parametrize(
    "value",
    [None, 1, 1.5, True, "", "x", [], {}, [None], {"a": None}, object(), "{{ x }}", -1, 10**30, "\n", ["a:B"]],
)
def test_no_value_of_any_type_raises(value):
    for name in (
        "aiinfra_gpu_count",
        "k3s_node_taints",
        "k3s_node_labels",
        "vllm_models",
        "k3s_token",
        "k3s_node_ip",
        "k3s_registration_address",
        "litellm_port",
        "litellm_replicas",
        "aiinfra_namespace",
        "k3s_install_mode",
    ):
        inventory_spec.spec_problems(SPECS, {"h": {name: value}}, {"h": [name]})


def test_every_role_spec_is_read():
    roles = {spec["role"] for spec in SPECS.values()}
    assert {"k3s", "vllm", "nim", "litellm", "traefik", "monitoring", "prereq"} <= roles
    assert SPECS["vllm_models"]["options"]["tensor_parallel_size"]["type"] == "int"


def test_every_fact_the_collection_sets_is_known():
    """A fact a role or playbook sets (set_fact, register) may be in hostvars when validate.yml or render.yml runs its
    check: none is an unknown variable (internal ones start with __)."""
    root = Path(__file__).parents[3]
    names = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                    names.update(value)
                elif key == "register" and isinstance(value, str):
                    names.add(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in [*root.glob("roles/*/tasks/*.yml"), *root.glob("playbooks/*.yml")]:
        walk(yaml.safe_load(path.read_text()))
    assert {"site_plan_current", "vllm_output_objects"} <= names
    for name in sorted(names):
        assert inventory_spec.unknown_variable_problems("localhost", [name], SPECS) == [], name


def test_a_retired_variable_is_left_to_its_own_check():
    assert inventory_spec.unknown_variable_problems("h", ["gpu_operator_runtime_default"], SPECS) == []
