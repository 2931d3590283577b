# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's consumers: who may call it, with which models and limits, and by which key.

Each consumer (``litellm_consumers``) gets its own key. A key exists in clear only twice: in the 0600 file
playbooks/consumers.yml writes for the operator when it issues or rotates it, and in the client that presents it;
the site stores its SHA-256 (``litellm_consumer_key_hashes``, written by that playbook) or, for a key the operator
chose, the vault (``litellm_consumer_keys``). The gateway mounts the hashes (a Secret) and its auth hook
(consumer_auth.py) compares the hash of each presented key with them.

``consumer_plan`` validates the inventory's entries and decides everything the roles need (the plan's
``consumers``); ``consumer_records`` is what the gateway's Secret holds.
"""

import hashlib
import json
import re
import secrets as _random

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import problem, truthy

CODE = "CONSUMER"
SITE = "all"
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
KEY_PREFIX = "sk-"
# A random key: sk- and 48 hex characters (192 bits), the form LiteLLM's own keys take.
KEY_BYTES = 24
RESERVED = ("admin", "unknown")  # what the hook's log lines call the master key and a refused key
FIELDS = ("name", "team", "models", "rpm_limit", "tpm_limit", "spend_alert_usd_per_hour", "revoked")


def key_hash(key):
    """The SHA-256 (hex) of a key: what the site stores and the hook compares."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key():
    return KEY_PREFIX + _random.token_hex(KEY_BYTES)


def key_problems(variable, key):
    """Why a key must be refused (never quoting it)."""
    fix = "put a random key in a vault-encrypted group_vars file, e.g. sk-$(openssl rand -hex 24)"
    if not key:
        return ["%s is not set: %s" % (variable, fix)]
    if not isinstance(key, str):
        return ["%s is not a string: %s" % (variable, fix)]
    problems = []
    if not key.startswith(KEY_PREFIX):
        problems.append("%s does not start with sk- (LiteLLM requires it): %s" % (variable, fix))
    body = key[len(KEY_PREFIX) :] if key.startswith(KEY_PREFIX) else key
    if len(body) < 32:
        problems.append("%s has %d characters after sk-, fewer than 32: %s" % (variable, len(body), fix))
    elif len(set(body)) < 12:
        problems.append("%s repeats too few distinct characters to be random: %s" % (variable, fix))
    return problems


def _positive(value, number=int):
    if isinstance(value, bool):
        return None
    try:
        out = number(value)
    except (TypeError, ValueError):
        return None
    if number is int and str(value).strip() != str(out):
        return None
    return out if out > 0 else None


def consumer_plan(entries, model_names, defaults, hashes=None, keys=None, gateway_on=True, master_key=""):
    """(consumers, revoked names, problems).

    entries: ``litellm_consumers``; model_names: the site's served model names; defaults: ``rpm_limit`` and
    ``tpm_limit`` for entries that set none; hashes: ``litellm_consumer_key_hashes`` ({name: sha256});
    keys: ``litellm_consumer_keys`` ({name: key}, vault; None when the run handles no secrets).

    A consumer's ``models`` default to every model of the site (the list is written out in the plan); ``key`` says
    where its key comes from: ``issued`` (a hash from playbooks/consumers.yml), ``vault`` or ``missing``.
    """
    problems, consumers, revoked, seen = [], [], [], set()
    taken = {key_hash(master_key)} if master_key else set()  # hashes no vault key may repeat
    hashes = dict(hashes or {})
    known = sorted(model_names)

    def add(variable, message, fix, severity="error"):
        problems.append(problem(CODE, SITE, variable, message, fix, severity))

    if entries in (None, ""):
        entries = []
    if not isinstance(entries, list):
        add("litellm_consumers", "litellm_consumers is %s, not a list" % type(entries).__name__, "give a list")
        return [], [], problems
    if entries and not gateway_on:
        add("litellm_consumers", "litellm_consumers is set but litellm_enabled is false", "enable the gateway")
    for index, entry in enumerate(entries):
        where = "litellm_consumers[%d]" % index
        if not isinstance(entry, dict):
            add("litellm_consumers", "%s is not a mapping" % where, "give name, team, models, rpm_limit, tpm_limit")
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            add(
                "litellm_consumers",
                "%s: name %r is not a lower-case DNS label (it names the consumer in metrics and logs)" % (where, name),
                "use lower-case letters, digits and '-', at most 63 characters",
            )
            continue
        where = "litellm_consumers[%s]" % name
        if name in RESERVED:
            add("litellm_consumers", "%s: %s names the master key in logs and metrics" % (where, name), "rename it")
            continue
        if name in seen:
            add("litellm_consumers", "%s appears twice" % where, "give each consumer a unique name")
            continue
        seen.add(name)
        unknown = sorted(set(entry) - set(FIELDS))
        if unknown:
            add(
                "litellm_consumers",
                "%s has unknown key(s) %s" % (where, ", ".join(unknown)),
                "use only " + ", ".join(FIELDS),
            )
        if truthy(entry.get("revoked", False)):
            revoked.append(name)
            continue
        team = entry.get("team", name)
        if not isinstance(team, str) or not NAME.match(team):
            add("litellm_consumers", "%s: team %r is not a lower-case DNS label" % (where, team), "name the team")
            team = name
        models = entry.get("models")
        if models is None:
            models = list(known)
        elif not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
            add("litellm_consumers", "%s: models must be a non-empty list of served names" % where, "list the models")
            models = []
        else:
            missing = sorted(set(models) - set(known))
            if missing:
                add(
                    "litellm_consumers",
                    "%s: model(s) %s are not served by this site (served: %s)"
                    % (where, ", ".join(missing), ", ".join(known) or "none"),
                    "use served names of vllm_models or nim_models",
                )
            models = sorted(set(models) & set(known))
        limits = {}
        for field in ("rpm_limit", "tpm_limit"):
            value = entry.get(field, defaults.get(field))
            limits[field] = _positive(value)
            if limits[field] is None:
                add(
                    "litellm_consumers",
                    "%s: %s is %r, not a whole number above 0" % (where, field, value),
                    "give a limit above 0 (litellm_consumer_%s is the default)" % field,
                )
        alert = entry.get("spend_alert_usd_per_hour")
        if alert is not None:
            alert = _positive(alert, float)
            if alert is None:
                add(
                    "litellm_consumers",
                    "%s: spend_alert_usd_per_hour is %r, not a number above 0"
                    % (where, entry.get("spend_alert_usd_per_hour")),
                    "give US dollars per hour, or leave it out",
                )
        source, digest, refused = "missing", "", False
        given = (keys or {}).get(name)
        if keys is not None and name in (keys or {}):
            found = key_problems("litellm_consumer_keys[%s]" % name, given)
            for message in found:
                problems.append(
                    problem("SECRET", SITE, "litellm_consumer_keys", message, "or leave it out to have one issued")
                )
            digest = key_hash(given) if isinstance(given, str) else ""
            if not found and digest in taken:
                found = ["litellm_consumer_keys[%s] is the master key or another consumer's key" % name]
                for message in found:
                    problems.append(problem("SECRET", SITE, "litellm_consumer_keys", message, "give each its own key"))
            refused = bool(found)
            if not found:
                source = "vault"
                taken.add(digest)
            else:
                digest = ""
        elif name in hashes:
            if not isinstance(hashes[name], str) or not SHA256.match(hashes[name]):
                refused = True
                add(
                    "litellm_consumer_key_hashes",
                    "litellm_consumer_key_hashes[%s] is not a SHA-256 (64 lower-case hex characters): the gateway "
                    "refuses this consumer until a key is issued" % name,
                    "run playbooks/consumers.yml (it issues a new key in its place)",
                    "warning",
                )
            else:
                source, digest = "issued", hashes[name]
        if source == "missing" and keys is not None and not refused:  # one finding per cause
            add(
                "litellm_consumer_key_hashes",
                "%s has no key yet: the gateway refuses it until one is issued" % where,
                "run playbooks/consumers.yml, or give one in litellm_consumer_keys (vault)",
                "warning",
            )
        consumers.append(
            {
                "name": name,
                "team": team,
                "models": models,
                "rpm_limit": limits["rpm_limit"],
                "tpm_limit": limits["tpm_limit"],
                "spend_alert_usd_per_hour": alert,
                "key": source,
                "key_sha256": digest,
            }
        )
    stale = sorted(str(n) for n in set(hashes) - {c["name"] for c in consumers})
    if stale:
        add(
            "litellm_consumer_key_hashes",
            "key hashes of %s belong to no active consumer: the gateway no longer accepts their keys"
            % ", ".join(stale),
            "run playbooks/consumers.yml to drop them from litellm_consumer_key_hashes",
            "warning",
        )
    return consumers, sorted(revoked), problems


def consumer_records(consumers):
    """What the gateway's consumers Secret holds: one record per consumer with a key (hash, never the key)."""
    return [
        {
            "key_sha256": c["key_sha256"],
            "alias": c["name"],
            "team": c["team"],
            "models": list(c["models"]),
            "rpm_limit": c["rpm_limit"],
            "tpm_limit": c["tpm_limit"],
        }
        for c in sorted(consumers, key=lambda c: c["name"])
        if c.get("key_sha256")
    ]


def issue_keys(consumers, hashes, rotate=()):
    """(new hashes, {name: new key}) for playbooks/consumers.yml.

    consumers: the plan's consumers; hashes: the current ``litellm_consumer_key_hashes``; rotate: names whose key
    is replaced. A consumer whose key comes from the vault gets none; hashes of consumers that are gone or revoked
    are dropped. Unknown names in rotate raise ValueError.
    """
    names = {c["name"]: c for c in consumers}
    unknown = sorted(set(rotate) - set(names))
    if unknown:
        raise ValueError("consumers_rotate names %s, which are not active consumers" % ", ".join(unknown))
    out, issued = {}, {}
    for name, consumer in sorted(names.items()):
        if consumer["key"] == "vault":
            if name in rotate:
                raise ValueError("%s's key comes from litellm_consumer_keys (vault): change it there" % name)
            continue
        current = (hashes or {}).get(name)
        if current and SHA256.match(str(current)) and name not in rotate:
            out[name] = current
            continue
        key = new_key()
        issued[name] = key
        out[name] = key_hash(key)
    return out, issued


def hashes_document(hashes):
    """The hashes file playbooks/consumers.yml writes (an inventory variable file)."""
    lines = [
        "---",
        "# Written by playbooks/consumers.yml: the SHA-256 of each consumer's key (never the key). Keep it with the",
        "# inventory; edit litellm_consumers and run the playbook again to add, rotate or revoke a consumer.",
    ]
    if not hashes:
        lines.append("litellm_consumer_key_hashes: {}")
    else:
        lines.append("litellm_consumer_key_hashes:")
        # Quoted, so that no name reads back as a boolean or a number.
        lines.extend("  %s: %s" % (json.dumps(str(name)), json.dumps(str(hashes[name]))) for name in sorted(hashes))
    return "\n".join(lines) + "\n"
