# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side rewrite of the admin kubeconfig K3s writes on its first server."""

import yaml


def site_kubeconfig(text, server, name):
    """Return the kubeconfig with its single cluster pointed at `server` and cluster/user/context named `name`."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError("the K3s kubeconfig is not valid YAML: %s" % exc) from exc
    if not isinstance(config, dict):
        raise ValueError("the K3s kubeconfig is not a mapping")
    for key in ("clusters", "users", "contexts"):
        if len(config.get(key) or []) != 1:
            raise ValueError("expected exactly one entry in '%s' of the K3s kubeconfig" % key)
    if not str(server).startswith("https://"):
        raise ValueError("the API server URL must start with https://, got %r" % server)
    config["clusters"][0]["name"] = name
    config["clusters"][0]["cluster"]["server"] = server
    config["users"][0]["name"] = name
    config["contexts"][0]["name"] = name
    config["contexts"][0]["context"] = {"cluster": name, "user": name}
    config["current-context"] = name
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
