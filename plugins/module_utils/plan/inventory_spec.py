# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every variable an inventory sets, checked against the roles' argument specs and Kubernetes' own rules,
on the controller and without contacting a host.

Problems are dicts ``{code, severity, host, variable, problem, fix}``; severity ``error`` stops validate.yml,
``warning`` is printed. No input raises: a value of the wrong type is a problem, not a traceback.
"""

import difflib
import ipaddress
import re

# Kubernetes' naming rules as the API server states them (k8s.io/apimachinery/pkg/util/validation).
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Words that mark a placeholder, not a secret.
PLACEHOLDERS = ("change", "example", "password", "secret", "token", "default", "placeholder", "replace", "xxxx")
# Variables every inventory may set that no role declares.
ANSIBLE_PREFIXES = ("ansible_", "aiinfra_", "vault_", "molecule_", "inventory_", "group_names", "groups", "omit")
# How a type error names the type the argument spec asks for.
TYPE_NAMES = {
    "str": "a string",
    "int": "a whole number",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
}


def truthy(value):
    """An inventory boolean as Ansible passes it: True, or a string such as 'true', 'yes', 'on', '1' (any case,
    surrounding blanks ignored); everything else is false."""
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


def problem(code, host, variable, what, fix, severity="error"):
    return {"code": code, "severity": severity, "host": host, "variable": variable, "problem": what, "fix": fix}


# ---------------------------------------------------------------- Kubernetes rules

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text):
    """'key=value:Effect' or 'key:Effect' -> {key, value, effect} as the Kubernetes API writes taints."""
    spec, sep, effect = str(text).rpartition(":")
    if not sep or effect not in TAINT_EFFECTS or not spec:
        raise ValueError("taint %r is not key[=value]:Effect with Effect one of %s" % (text, ", ".join(TAINT_EFFECTS)))
    key, value = spec.partition("=")[::2]
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def dns1123_label_error(value):
    if not isinstance(value, str) or not value:
        return "is %r, not a name" % (value,)
    if len(value) > 63:
        return "has %d characters, more than the 63 a DNS-1123 label allows" % len(value)
    if not DNS1123_LABEL.match(value):
        return "is %r, not a DNS-1123 label (lower-case letters, digits and '-', alphanumeric at both ends)" % value
    return None


def dns1123_subdomain_error(value):
    if not isinstance(value, str) or not value or len(value) > 253:
        return "is %r, not a DNS-1123 subdomain of 1 to 253 characters" % (value,)
    for label in value.split("."):
        if dns1123_label_error(label):
            return "is %r, not a DNS-1123 subdomain (each dot-separated part a DNS-1123 label)" % value
    return None


def qualified_name_error(value):
    """A label or taint key: [prefix/]name, prefix a DNS-1123 subdomain, name 63 characters at most."""
    if not isinstance(value, str) or not value:
        return "is empty or not a string"
    prefix, sep, name = value.rpartition("/")
    if sep and dns1123_subdomain_error(prefix):
        return "has the prefix %r, which is not a DNS-1123 subdomain" % prefix
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        return (
            "is not a qualified name (63 characters at most: letters, digits, '-', '_', '.', alphanumeric at both ends)"
        )
    return None


def label_value_error(value):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "is not a string"
    text = str(value)
    if len(text) > 63 or not LABEL_VALUE.match(text):
        return "is not a label value (63 characters at most: letters, digits, '-', '_', '.', alphanumeric at both ends)"
    return None


def label_map_errors(value):
    """[(label key or '', why)] for a {key: value} label map."""
    if not isinstance(value, dict):
        return [("", "is not a mapping of label names to values")]
    out = []
    for key, val in value.items():
        why = qualified_name_error(key)
        if why:
            out.append((str(key), "label name %r %s" % (key, why)))
        why = label_value_error(val)
        if why:
            out.append((str(key), "label %r has the value %r, which %s" % (key, val, why)))
    return out


def taint_errors(value):
    """[why] for a list of K3s taint strings key[=value]:Effect."""
    if not isinstance(value, list):
        return ["is not a list of key[=value]:Effect strings"]
    out = []
    for taint in value:
        if not isinstance(taint, str):
            out.append("has %r, not a key[=value]:Effect string" % (taint,))
            continue
        spec, sep, effect = taint.rpartition(":")
        if not sep or not spec:
            out.append("has %r without an effect (key[=value]:Effect)" % taint)
            continue
        if effect not in TAINT_EFFECTS:
            close = difflib.get_close_matches(effect, TAINT_EFFECTS, n=1, cutoff=0.5)
            out.append(
                "has %r: the effect %r is not one of %s%s"
                % (taint, effect, ", ".join(TAINT_EFFECTS), " (did you mean %s?)" % close[0] if close else "")
            )
        key, _sep, val = spec.partition("=")
        why = qualified_name_error(key)
        if why:
            out.append("has %r: the key %s" % (taint, why))
        why = label_value_error(val) if val else None
        if why:
            out.append("has %r: the value %s" % (taint, why))
    return out


# ---------------------------------------------------------------- formats of the roles' variables


def _int(value):
    """The whole number a value stands for, or None (bools and fractions are not counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^[+-]?[0-9]+$", value.strip()):
        return int(value)
    return None


def count_error(value, minimum=1):
    number = _int(value)
    if number is None:
        return "is %r, not a whole number" % (value,)
    if number < minimum:
        return "is %d; it must be %d or more" % (number, minimum)
    return None


def port_error(value):
    number = _int(value)
    if number is None or not 1 <= number <= 65535:
        return "is %r, not a port number from 1 to 65535" % (value,)
    return None


def absolute_path_error(value):
    if value in ("", None):
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        return "is %r, not an absolute path" % (value,)
    if "/../" in value + "/" or "\n" in value:
        return "is %r: write it without .. segments" % value
    return None


def address_error(value):
    """A host name or IP address (no scheme, port or path)."""
    if value in ("", None):
        return None
    if not isinstance(value, str):
        return "is %r, not a host name or IP address" % (value,)
    if "://" in value or "/" in value:
        return "is %r: write the host name or IP address alone, without scheme or path" % value
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    if ":" in value:
        return "is %r: write the host name or IP address alone, without a port" % value
    return None if not dns1123_subdomain_error(value.lower()) else "is %r, not a host name or IP address" % value


def node_ip_error(value):
    if value in ("", None):
        return None
    try:
        ip = ipaddress.ip_address(str(value))
    except ValueError:
        return "is %r, not an IP address" % (value,)
    if ip.is_loopback or ip.is_unspecified or ip.is_multicast or ip.is_link_local:
        return "is %s, which other nodes cannot reach (loopback, unspecified, multicast or link-local)" % ip
    return None


def secret_strength_error(value, minimum=32):
    """Why a shared secret is weak (never quoting it)."""
    if value in ("", None):
        return None
    text = str(value)
    if len(text) < minimum:
        return "has %d characters, fewer than %d" % (len(text), minimum)
    if len(set(text)) < 10:
        return "uses only %d distinct characters: it is not random" % len(set(text))
    lowered = text.lower()
    if any(word in lowered for word in PLACEHOLDERS):
        return "contains a placeholder word"
    for size in range(1, len(text) // 2 + 1):
        unit = text[:size]
        if (unit * (len(text) // size + 1))[: len(text)] == text:
            return "repeats a pattern of %d character(s)" % size
    return None


def _format(check, fix):
    return {"check": check, "fix": fix}


# Variable name (regular expression) -> what its value must be, beyond the type the argument spec gives.
FORMATS = (
    (r".*_namespace$", _format(dns1123_label_error, "use a DNS-1123 label such as ai-serving")),
    (r"^aiinfra_namespace$", _format(dns1123_label_error, "use a DNS-1123 label such as ai-serving")),
    (r".*_port$", _format(port_error, "use a port number from 1 to 65535")),
    (r".*_replicas$", _format(count_error, "use a whole number of 1 or more")),
    (r"^aiinfra_gpu_count$", _format(lambda v: count_error(v, 0), "use the number of GPUs of the host (0 or more)")),
    (r"^aiinfra_gpu_memory_mib$", _format(count_error, "use the GPU memory in MiB, e.g. 23034 for an L4")),
    # Paths on the nodes or in the pods (controller directories may be relative to the playbook).
    (
        r"^(model_registry_path|vllm_store_mount|nim_store_mount|manifests_server_dir|prereq_sysctl_dir)$",
        _format(absolute_path_error, "use an absolute path such as /srv/models"),
    ),
    (r".*_node_labels$|.*_node_selector$", _format(None, "use label names and values as Kubernetes accepts them")),
    (r".*_node_taints$", _format(None, "write each taint as key[=value]:NoSchedule|PreferNoSchedule|NoExecute")),
    (r"^k3s_registration_address$", _format(address_error, "set the host name or IP address alone, e.g. 10.0.0.10")),
    (r"^k3s_node_ip$", _format(node_ip_error, "set the node's address on the cluster network")),
    (
        r"^k3s_(agent_)?token$",
        _format(secret_strength_error, "generate one with `openssl rand -hex 32` and keep it in ansible-vault"),
    ),
)
# List-of-dict options (model entries): per key, the format beyond the spec's type.
ENTRY_FORMATS = {
    "served_name": _format(dns1123_subdomain_error, "use lower-case letters, digits, '-' and '.' (a DNS-1123 name)"),
    "tensor_parallel_size": _format(count_error, "use a whole number of 1 or more (GPUs per replica)"),
    "replicas": _format(count_error, "use a whole number of 1 or more"),
    "max_replicas": _format(count_error, "use a whole number of 1 or more"),
    "gpus": _format(count_error, "use a whole number of 1 or more"),
    "port": _format(port_error, "use a port number from 1 to 65535"),
    "path": _format(
        lambda v: (
            "is %r: write it relative to the model store" % v if isinstance(v, str) and v.startswith("/") else None
        ),
        "write the model's directory relative to the store, e.g. Qwen/Qwen2.5-7B-Instruct",
    ),
}


def format_of(name):
    for pattern, fmt in FORMATS:
        if re.match(pattern, name):
            return fmt
    return None


# ---------------------------------------------------------------- argument specs


def merge_specs(role_specs):
    """{var: option spec} from {role: argument_specs document}; the first entry point that declares a variable
    with the most keys wins (main carries the full description)."""
    out = {}
    for role in sorted(role_specs):
        for entry in (role_specs[role] or {}).get("argument_specs", {}).values():
            for var, spec in ((entry or {}).get("options") or {}).items():
                spec = dict(spec or {}, role=role)
                if var not in out or len(spec) > len(out[var]):
                    out[var] = spec
    return out


def type_error(value, spec):
    """Why value is not of the spec's type; a secret's value (no_log) is never quoted, only its Python type."""
    kind = spec.get("type", "str")
    if kind in ("raw", "any") or value is None:
        return None
    ok = {
        "str": isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)),
        "path": isinstance(value, str),
        "int": _int(value) is not None,
        "float": not isinstance(value, bool) and _is_number(value),
        "bool": isinstance(value, bool) or str(value).lower() in ("yes", "no", "true", "false", "on", "off", "1", "0"),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
    }.get(kind, True)
    if ok:
        return None
    if spec.get("no_log"):
        return "is a %s, not %s" % (type(value).__name__, TYPE_NAMES.get(kind, kind))
    return "is %r (%s), not %s" % (value, type(value).__name__, TYPE_NAMES.get(kind, kind))


def _is_number(value):
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def _closest(name, known):
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    return close[0] if close else None


def value_problems(host, name, value, spec):
    """Problems of one variable's value against its spec and its format."""
    out = []
    why = type_error(value, spec)
    if why:
        return [
            problem(
                "TYPE",
                host,
                name,
                "%s %s" % (name, why),
                "give %s %s" % (name, TYPE_NAMES.get(spec.get("type"), spec.get("type"))),
            )
        ]
    choices = spec.get("choices")
    if choices and value not in choices and str(value) not in [str(c) for c in choices]:
        out.append(
            problem(
                "CHOICE",
                host,
                name,
                "%s is %r, not one of %s" % (name, value, ", ".join(str(c) for c in choices)),
                "set %s to one of %s" % (name, ", ".join(str(c) for c in choices)),
            )
        )
    if spec.get("type") == "list" and spec.get("elements") == "dict" and isinstance(value, list):
        for index, entry in enumerate(value):
            out += entry_problems(host, "%s[%d]" % (name, index), entry, spec.get("options") or {})
    elif spec.get("type") == "list" and spec.get("elements") in ("str", "int") and isinstance(value, list):
        for index, item in enumerate(value):
            why = type_error(item, {"type": spec["elements"]})
            if why:
                out.append(problem("TYPE", host, name, "%s[%d] %s" % (name, index, why), "fix the item"))
    fmt = format_of(name)
    if fmt and fmt["check"] is not None:
        why = fmt["check"](value)
        if why:
            out.append(problem("FORMAT", host, name, "%s %s" % (name, why), fmt["fix"]))
    elif fmt and re.match(r".*_node_taints$", name):
        out += [problem("TAINT", host, name, "%s %s" % (name, why), fmt["fix"]) for why in taint_errors(value)]
    elif fmt:
        out += [
            problem("LABEL", host, name, "%s: %s" % (name, why), fmt["fix"]) for _key, why in label_map_errors(value)
        ]
    return out


def entry_problems(host, where, entry, options):
    """A list-of-dict entry (a model) against its options: required keys, unknown keys, types and formats."""
    if not isinstance(entry, dict):
        return [
            problem(
                "TYPE", host, where, "%s is %r, not a mapping" % (where, entry), "write each entry as key: value pairs"
            )
        ]
    if not options:
        return []
    out = []
    for key, spec in options.items():
        if spec.get("required") and key not in entry:
            out.append(problem("REQUIRED", host, where, "%s has no %s" % (where, key), "add %s" % key))
    for key, value in entry.items():
        if key not in options:
            close = _closest(str(key), options)
            out.append(
                problem(
                    "UNKNOWN_KEY",
                    host,
                    where,
                    "%s has the key %r, which is not one of its settings%s"
                    % (where, key, " (did you mean %s?)" % close if close else ""),
                    "rename it to %s" % close if close else "remove it (known: %s)" % ", ".join(sorted(options)),
                )
            )
            continue
        why = type_error(value, options[key])
        if why:
            out.append(problem("TYPE", host, where, "%s.%s %s" % (where, key, why), "fix %s" % key))
            continue
        choices = options[key].get("choices")
        if choices and value not in choices:
            out.append(
                problem("CHOICE", host, where, "%s.%s is %r, not one of %s" % (where, key, value, choices), "pick one")
            )
        fmt = ENTRY_FORMATS.get(key)
        why = fmt["check"](value) if fmt else None
        if why:
            out.append(problem("FORMAT", host, where, "%s.%s %s" % (where, key, why), fmt["fix"]))
    return out


# Variables the collection reads or sets that no role declares: extra variables (-e) of the playbooks, facts its roles
# set, and retired variables refused by a check of their own. They may reach hostvars without being misspelt.
PLAYBOOK_VARIABLES = (
    "render_dir",
    "render_plan_file",
    "render_secrets",
    "consumers_apply",
    "consumers_rotate",
    "upgrade_path",
    "site_plan_current",
    # Facts the roles set for each other or for the report (a role's outputs are <role>_output_*, below).
    "drill_node_loss_result",
    "drill_report",
    "manifests_applied_secrets",
    "prereq_firewall_applied",
    # Read only to be refused with a message of its own (gpu_operator.operator_problems).
    "gpu_operator_runtime_default",
)
# A role's public outputs (<role>_output_objects, _secrets, _charts, ...), facts it sets for the manifests role.
OUTPUT_FACT = re.compile(r"^[a-z0-9_]+_output_[a-z0-9_]+$")
# Ansible's magic variables that hostvars holds besides the inventory's.
MAGIC_VARIABLES = (
    "playbook_dir",
    "play_hosts",
    "role_name",
    "role_names",
    "role_path",
    "role_uuid",
    "hostvars",
    "environment",
    "vars",
)


def unknown_variable_problems(host, names, specs):
    """Variables no role declares. One whose name is close to a declared one (difflib, ratio 0.8 or more) is an
    error naming it: the site would otherwise silently run with the known variable's default. Any other is a
    warning (an operator's own variable, e.g. one a vault file feeds, is allowed)."""
    out = []
    for name in sorted(names, key=str):
        if (
            not isinstance(name, str)
            or name in specs
            or name in PLAYBOOK_VARIABLES
            or name in MAGIC_VARIABLES
            or OUTPUT_FACT.match(name)
            or name.startswith(ANSIBLE_PREFIXES)
            or name.startswith("_")
        ):
            continue
        close = _closest(name, specs)
        if close:
            out.append(
                problem(
                    "UNKNOWN_VARIABLE",
                    host,
                    name,
                    "%s is not a variable of this collection (did you mean %s?): %s keeps its default and %s is "
                    "read by nothing" % (name, close, close, name),
                    "rename %s to %s" % (name, close),
                )
            )
        else:
            out.append(
                problem(
                    "UNKNOWN_VARIABLE",
                    host,
                    name,
                    "%s is not a variable of this collection: no role reads it" % name,
                    "remove %s, or keep it if only your own variables use it" % name,
                    severity="warning",
                )
            )
    return out


# The name of earlier releases.
unknown_variable_warnings = unknown_variable_problems


def same_machine_problems(hostvars):
    """Two inventory hosts that name one machine (the same ansible_host, or node names equal but for case)."""
    out, by_address, by_name = [], {}, {}
    for host in sorted(hostvars):
        hv = hostvars[host] or {}
        address = hv.get("ansible_host")
        connection = hv.get("ansible_connection")
        if isinstance(address, str) and address and connection != "local":
            key = (address.lower(), str(hv.get("ansible_port", 22)))
            if key in by_address:
                out.append(
                    problem(
                        "SAME_MACHINE",
                        host,
                        "ansible_host",
                        "%s and %s both reach %s: one machine cannot be two nodes" % (by_address[key], host, address),
                        "give each host its own address, or remove one of them",
                    )
                )
            by_address.setdefault(key, host)
        lowered = host.lower()
        if lowered in by_name:
            out.append(
                problem(
                    "SAME_MACHINE",
                    host,
                    "inventory_hostname",
                    "%s and %s become the same Kubernetes node name (%s)" % (by_name[lowered], host, lowered),
                    "rename one of them",
                )
            )
        by_name.setdefault(lowered, host)
    return out


def spec_problems(specs, hostvars, declared):
    """All problems of an inventory: specs {var: option spec}; hostvars {host: {var: value}} (what the inventory
    gives each host); declared {host: [var names the inventory itself sets]} (for misspelt and unknown names)."""
    out = []
    for host in sorted(hostvars):
        hv = hostvars[host] or {}
        for name in sorted(hv):
            if name in specs:
                out += value_problems(host, name, hv[name], specs[name])
            elif format_of(name) and name.startswith("aiinfra_"):
                out += value_problems(host, name, hv[name], {"type": "raw"})
        out += unknown_variable_problems(host, declared.get(host) or [], specs)
    out += same_machine_problems(hostvars)
    return merge(out)


def merge(problems):
    """One problem per (code, variable, problem, fix), naming every host it applies to."""
    merged = {}
    for p in problems:
        key = (p["code"], p["variable"], p["problem"], p["fix"])
        if key in merged:
            merged[key]["host"] += "," + p["host"]
        else:
            merged[key] = dict(p)
    return list(merged.values())


def render(p):
    line = "%s %s [%s] %s - %s" % (p["severity"].upper(), p["code"], p["host"], p["variable"], p["problem"])
    return line + ("; fix - %s" % p["fix"] if p.get("fix") else "")
