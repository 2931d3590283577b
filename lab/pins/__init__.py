"""The collection's version pins, read from the role defaults: the one reader every lab tool and test uses.

A pin is a top-level ``<role>_<name>: value`` line of roles/<role>/defaults/main.yml holding a plain version or
image reference (``k3s_version: v1.36.4+k3s1``, ``litellm_image: ghcr.io/berriai/litellm:v1.110.2``). The role
is the one whose name prefixes the variable (the collection's naming rule, tests/unit/test_role_variables.py).
The value is read as written, never through a YAML parser: a version stays the text it is (``1.20`` is not the
float 1.2), a templated value is refused, and only the standard library is needed (``python3 -m
lab.nodes.labctl down`` runs before the project venv exists).

    read_pins()            {variable: value} for every pin in PINNED
    read_pin("k3s_version") one pin
    pin_source(var)        "var in roles/<role>/defaults/main.yml", for messages
    parse_pin(text, var)   the value of one `var:` line of a defaults file's text
"""

from __future__ import annotations

import re
from pathlib import Path

from lab import ROOT

# The pins the lab builds from and versions audits: K3s, the charts, and the images whose tags are releases.
PINNED = (
    "k3s_version",
    "gpu_operator_chart_version",
    "cert_manager_chart_version",
    "autoscaling_chart_version",
    "monitoring_chart_version",
    "vllm_image",
    "litellm_image",
    "gpu_verify_vectoradd_image",
)


class PinError(ValueError):
    """A pin is missing or not a plain value; the message names the variable (and the file, when read from one)."""


def parse_pin(text: str, var: str) -> str:
    """The value of the top-level `var: value` line of a defaults file's text: quotes and a trailing comment dropped;
    a missing line, an empty value or a Jinja template is a PinError."""
    match = re.search(rf"^{re.escape(var)}:[ \t]*(.*?)[ \t]*$", text, re.MULTILINE)
    if not match:
        raise PinError(f"no `{var}:` line")
    value = match.group(1)
    if value[:1] in ("'", '"'):
        end = value.find(value[0], 1)
        value = value[1:end] if end > 0 else value
    else:
        value = value.split(" #", 1)[0].strip()
    if not value or "{{" in value:
        raise PinError(f"`{var}` is {value!r}, not a plain version")
    return value


def defaults_file(var: str, root: Path = ROOT) -> Path:
    """roles/<role>/defaults/main.yml of the role whose name prefixes `var` (the longest such role)."""
    roles = [p.parent.parent.name for p in (root / "roles").glob("*/defaults/main.yml")]
    owners = [role for role in roles if var.startswith(f"{role}_")]
    if not owners:
        raise PinError(f"`{var}`: no role under {root / 'roles'} has a name that prefixes it")
    return root / "roles" / max(owners, key=len) / "defaults" / "main.yml"


def pin_source(var: str, root: Path = ROOT) -> str:
    """Where a pin is set, for messages: "k3s_version in roles/k3s/defaults/main.yml" (the variable alone when no
    role claims it)."""
    try:
        return f"{var} in {defaults_file(var, root).relative_to(root)}"
    except PinError:
        return var


def read_pin(var: str, root: Path = ROOT) -> str:
    """One pin from its role's defaults file."""
    path = defaults_file(var, root)
    try:
        return parse_pin(path.read_text(), var)
    except PinError as exc:
        raise PinError(f"{path.relative_to(root)}: {exc}") from None


def read_pins(root: Path = ROOT) -> dict[str, str]:
    """Every pin of PINNED, {variable: value}."""
    return {var: read_pin(var, root) for var in PINNED}
