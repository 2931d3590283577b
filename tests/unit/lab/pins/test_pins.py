"""lab/pins/__init__.py: the one reader of the version pins in the role defaults."""

import re

import pytest
import yaml

from lab import pins


@pytest.mark.parametrize(
    ("text", "var", "expected"),
    [
        ("---\nk3s_version: v1.33.5+k3s1\n", "k3s_version", "v1.33.5+k3s1"),
        ("a: 1\nmonitoring_chart_version: 77.1.1  # kube-prometheus-stack\n", "monitoring_chart_version", "77.1.1"),
        ('x_version: "2.17.0"\n', "x_version", "2.17.0"),
        ("x_version: 'v25.10.1'\n", "x_version", "v25.10.1"),
        ('x_version: "v1.21.2"  # pinned\n', "x_version", "v1.21.2"),
        ("x_version_file: a.tgz\nx_version: v1\n", "x_version", "v1"),  # the key, not a longer one
        ("x_version: 1.20\n", "x_version", "1.20"),  # the text as written, not the float YAML would make of it
        ("---\n# c\nx_image: ghcr.io/berriai/litellm:v1.110.2\n", "x_image", "ghcr.io/berriai/litellm:v1.110.2"),
    ],
)
def test_parse_pin(text, var, expected):
    assert pins.parse_pin(text, var) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("other: 1\n", "no `x_version:` line"),
        ("  x_version: v1\n", "no `x_version:` line"),  # nested, not a role default
        ('x_version: "{{ y }}"\n', "not a plain version"),
        ("x_version:\n", "not a plain version"),
    ],
)
def test_parse_pin_refuses(text, message):
    with pytest.raises(pins.PinError, match=re.escape(message)):
        pins.parse_pin(text, "x_version")


def test_the_role_whose_name_prefixes_the_variable_holds_it(root):
    assert pins.defaults_file("k3s_version", root) == root / "roles" / "k3s" / "defaults" / "main.yml"
    assert pins.defaults_file("gpu_verify_vectoradd_image", root).parent.parent.name == "gpu_verify"
    assert pins.pin_source("cert_manager_chart_version", root) == (
        "cert_manager_chart_version in roles/cert_manager/defaults/main.yml"
    )
    with pytest.raises(pins.PinError, match="no role"):
        pins.defaults_file("nosuchrole_version", root)
    assert pins.pin_source("nosuchrole_version", root) == "nosuchrole_version"


def test_read_pins_agrees_with_yaml_on_every_pin_of_the_repository(root):
    found = pins.read_pins(root)
    assert sorted(found) == sorted(pins.PINNED)
    for var, value in found.items():
        assert value == str(yaml.safe_load(pins.defaults_file(var, root).read_text())[var]), var
    assert re.fullmatch(r"v\d+\.\d+\.\d+\+k3s\d+", found["k3s_version"])
    assert all(":" in found[var] for var in pins.PINNED if var.endswith("_image"))


def test_a_missing_pin_names_its_file(tmp_path):
    defaults = tmp_path / "roles" / "demo" / "defaults" / "main.yml"
    defaults.parent.mkdir(parents=True)
    defaults.write_text("demo_enabled: true\n")
    with pytest.raises(pins.PinError, match=r"^roles/demo/defaults/main.yml: no `demo_version:` line$"):
        pins.read_pin("demo_version", tmp_path)
    defaults.write_text("demo_version: v1.2.3\n")
    assert pins.read_pin("demo_version", tmp_path) == "v1.2.3"
