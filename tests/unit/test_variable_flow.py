"""Data flows one way: inventory -> the site plan -> roles. This reads every role and playbook and lists each
variable reference, then holds the rules:

- a role reads its own variables (defaults, vars, argument specs, the `__<role>_*` facts it sets), the inventory's
  own variables (names no role defines), `site_plan_current` (the plan), the public outputs of the roles it runs
  (`<role>_output_*`) and Ansible's; never another role's variables or private facts. Naming another role's
  variable to pass it as a parameter (the `vars:` of an include_role of that role) is not reading it;
- a playbook reads the names it sets itself (play and task vars, facts, registers), the plan and the public outputs
  of roles (`<role>_output_*`); it passes parameters to roles, but reads no role's variable or fact.

References are the names inside Jinja (`{{ }}`, `{% %}`, and the bare expressions of when/that/...), with string
literals removed, so a message that names a variable in prose is not a reference."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
PLAYBOOKS = sorted((ROOT / "playbooks").glob("*.yml"))
PLAN = "site_plan_current"
# Keys whose string value is a Jinja expression without braces.
EXPRESSION_KEYS = {"when", "that", "changed_when", "failed_when", "until", "var", "removed_at_date"}
INCLUDES = {"ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"}
JINJA = re.compile(r"\{\{(.*?)\}\}|\{%-?(.*?)-?%\}", re.S)
LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
NAME = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*")
PRIVATE = re.compile(r"^__(?!aiinfra_)[a-z][a-z0-9_]*$")  # __aiinfra_*: the groups groups.yml makes


def names_in(expression):
    """The names an expression reads (attributes after a dot and string literals are not names), and the private
    names a string literal gives to hostvars (extract, selectattr, map(attribute=...)): '__<name>'."""
    private = {m.group(0)[1:-1] for m in LITERAL.finditer(expression) if PRIVATE.match(m.group(0)[1:-1])}
    return set(NAME.findall(LITERAL.sub("''", expression))) | private


def references(value, key=None):
    """Every name read in a YAML value, with the path to it."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from references(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from references(item, key)
    elif isinstance(value, str):
        if key in EXPRESSION_KEYS and "{{" not in value:
            yield from names_in(value)
        for match in JINJA.finditer(value):
            yield from names_in(match.group(1) or match.group(2) or "")


def load(path):
    return yaml.safe_load(path.read_text()) or {}


def owners():
    """Each role-defined name and its role: defaults, vars, argument-spec options, public outputs (set_fact)."""
    out = {}
    for role in ROLES:
        base = ROOT / "roles" / role
        for kind in ("defaults", "vars"):
            path = base / kind / "main.yml"
            if path.exists():
                out.update(dict.fromkeys(load(path), role))
        spec = base / "meta" / "argument_specs.yml"
        if spec.exists():
            for entry in (load(spec).get("argument_specs") or {}).values():
                for name in entry.get("options") or {}:
                    out.setdefault(name, role)
    return out


def owner_of(name, table):
    if name in table:
        return table[name]
    for role in sorted(ROLES, key=len, reverse=True):
        if name.startswith(f"__{role}_") or name.startswith(f"{role}_output_"):
            return role
    return None


def task_reads(tasks):
    """(name, role the name is passed to or None) for every name a task list reads; the keys of an include_role's
    vars are the parameters of that role, their values are read."""
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        for block in ("block", "rescue", "always"):
            yield from task_reads(task.get(block))
        include = next((task[k] for k in INCLUDES if k in task), None)
        target = include.get("name", "").rsplit(".", maxsplit=1)[-1] if isinstance(include, dict) else None
        for key, value in task.items():
            if key in ("block", "rescue", "always"):
                continue
            if key == "vars" and isinstance(value, dict):
                for param, param_value in value.items():
                    yield param, target
                    yield from ((n, None) for n in references(param_value))
            elif key == "ansible.builtin.set_fact" and isinstance(value, dict):
                yield from ((n, None) for n in references(value))
            else:
                yield from ((n, None) for n in references(value, key))


def role_violations(role, table):
    base = ROOT / "roles" / role
    found = set()
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.suffix == ".j2":
            reads = [(n, None) for m in JINJA.finditer(path.read_text()) for n in names_in(m.group(1) or m.group(2))]
        elif path.suffix == ".yml" and path.parent.name in ("tasks", "handlers"):
            reads = list(task_reads(load(path)))
        elif path.suffix == ".yml" and path.parent.name in ("defaults", "vars"):
            reads = [(n, None) for n in references(load(path))]
        else:
            continue
        for name, passed_to in reads:
            owner = owner_of(name, table)
            if owner in (None, role) or name == PLAN or passed_to == owner or name.startswith(f"{owner}_output_"):
                continue
            found.add(f"{rel}: {name} (of {owner})")
    return sorted(found)


def playbook_violations(path, table):
    plays = load(path)
    own = set()
    for play in plays:
        own.update(play.get("vars") or {})
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            for task in _flat(play.get(section)):
                own.update((task.get("ansible.builtin.set_fact") or {}) if isinstance(task, dict) else {})
                if isinstance(task, dict) and task.get("register"):
                    own.add(task["register"])
                own.update(task.get("vars") or {} if isinstance(task, dict) else {})
                own.add(((task.get("loop_control") or {}) if isinstance(task, dict) else {}).get("loop_var", "item"))
    found = set()
    for play in plays:
        reads = list(references(play.get("vars") or {}))
        reads += list(references({k: v for k, v in play.items() if k in ("hosts", "when")}))
        pairs = [(n, None) for n in reads]
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            pairs += list(task_reads(play.get(section)))
        for role in play.get("roles") or []:
            if isinstance(role, dict):
                target = str(role.get("role", role.get("name", ""))).rsplit(".", maxsplit=1)[-1]
                for key, value in role.items():
                    if key not in ("role", "name", "tags", "when"):
                        pairs.append((key, target))
                    pairs += [(n, None) for n in references(value, key)]
        for name, passed_to in pairs:
            owner = owner_of(name, table)
            if name.startswith("__") and name not in own and owner is None:
                found.add(f"{path.name}: {name} (not set here)")
            if (
                owner is None
                or name in own
                or name == PLAN
                or passed_to == owner
                or name.startswith(f"{owner}_output_")
            ):
                continue
            found.add(f"{path.name}: {name} (of {owner})")
    return sorted(found)


def _flat(tasks):
    for task in tasks if isinstance(tasks, list) else []:
        yield task
        if isinstance(task, dict):
            for block in ("block", "rescue", "always"):
                yield from _flat(task.get(block))


@pytest.mark.parametrize("role", ROLES)
def test_a_role_reads_no_other_roles_variables(role):
    assert role_violations(role, owners()) == []


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: p.name)
def test_a_playbook_reads_only_the_plan_public_outputs_and_its_own_names(path):
    assert playbook_violations(path, owners()) == []


def test_the_reader_sees_references():
    table = {"litellm_port": "litellm", "traefik_host": "traefik"}
    assert names_in("litellm_port | default(8000) ~ 'litellm_port' ~ x.traefik_host") == {
        "litellm_port",
        "default",
        "x",
    }
    assert "__prereq_kind" in names_in("hosts | map('extract', hostvars, '__prereq_kind')")
    assert "__aiinfra_gpu" not in names_in("groups['__aiinfra_gpu']")
    assert owner_of("__vllm_models", table) == "vllm" and owner_of("traefik_output_objects", table) == "traefik"
    reads = list(
        task_reads(
            [
                {
                    "ansible.builtin.include_role": {"name": "aiinfra.k3s.traefik"},
                    "vars": {"traefik_host": "{{ litellm_port }}"},
                    "when": "traefik_host",
                }
            ]
        )
    )
    assert ("traefik_host", "traefik") in reads and ("litellm_port", None) in reads and ("traefik_host", None) in reads


def test_what_the_plan_reads_does_not_come_from_the_plan():
    """The site plan's inputs (site_plan.VARIABLES and SECRET_VARIABLES) default to their roles' defaults, which the
    plan's action loads; a default that read site_plan_current would ask the plan for its own input."""
    from ansible_collections.aiinfra.k3s.plugins.module_utils.plan import site_plan

    defaults = {}
    for role in ROLES:
        path = ROOT / "roles" / role / "defaults" / "main.yml"
        if path.exists():
            defaults.update(load(path))
    inputs = [name for name in site_plan.VARIABLES + site_plan.SECRET_VARIABLES if name in defaults]
    assert len(inputs) > 40  # the defaults were read
    circular = [name for name in inputs if PLAN in set(references({name: defaults[name]}))]
    assert circular == []
