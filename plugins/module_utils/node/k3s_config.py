# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build /etc/rancher/k3s/config.yaml for a server or an agent from structured variables.

Keys are K3s flags without the leading dashes. Managed keys come from dedicated variables; the
free-form map adds any other flag and may not silently override a managed one.
"""

from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import truthy

# The config.yaml keys K3s accepts (long flag names without dashes) in the v1.36 line of k3s_version. The K3s
# module is not served by the Go module proxy, so the lists were taken from the flag table RKE2 keeps of K3s's
# flags (pkg/cli/cmds/k3sopts.go: RKE2 refuses to start when that table and K3s's flags differ), with the flags
# added since from K3s's pull requests: etcd-s3-retention (k3s#12669) and helm-controller-arg (k3s#14185, in
# v1.36.3+k3s1). Left out: `config` (meaningless inside the file) and the flags K3s removed (no-deploy,
# cluster-secret, no-flannel, disable-selinux in v1.26). Not a flag at any version: node-taint-control-plane
# (servers take node-taint, e.g. CriticalAddonsOnly=true:NoExecute).

# Flags every node (server or agent) accepts.
AGENT_FLAGS = frozenset(
    """
token token-file server data-dir node-name with-node-id node-label node-taint image-credential-provider-bin-dir
image-credential-provider-config selinux lb-server-port protect-kernel-defaults container-runtime-endpoint
default-runtime image-service-endpoint pause-image snapshotter private-registry disable-default-registry-endpoint
nonroot-devices airgap-extra-registry node-ip bind-address node-external-ip node-internal-dns node-external-dns
resolv-conf flannel-iface flannel-conf flannel-cni-conf kubelet-arg kube-proxy-arg enable-pprof rootless
prefer-bundled-bin docker vpn-auth vpn-auth-file debug v vmodule log alsologtostderr
""".split()
)

# Flags only agents accept.
AGENT_ONLY_FLAGS = frozenset(["disable-apiserver-lb"])

# Flags only servers accept.
SERVER_FLAGS = frozenset(
    """
https-listen-port supervisor-port apiserver-port apiserver-bind-address advertise-address advertise-port tls-san
tls-san-security disable-agent cluster-cidr service-cidr service-node-port-range cluster-dns cluster-domain
cluster-init cluster-reset cluster-reset-restore-path flannel-backend flannel-ipv6-masq flannel-external-ip
egress-selector-mode servicelb-namespace write-kubeconfig write-kubeconfig-mode write-kubeconfig-group
helm-job-image helm-controller-arg agent-token agent-token-file kube-apiserver-arg etcd-arg kube-scheduler-arg
kube-controller-manager-arg kube-cloud-controller-manager-arg kube-controller-arg kube-cloud-controller-arg
datastore-endpoint datastore-cafile datastore-certfile datastore-keyfile kine-tls default-local-storage-path
disable disable-scheduler disable-cloud-controller disable-network-policy disable-kube-proxy
disable-helm-controller disable-apiserver disable-controller-manager disable-etcd embedded-registry
supervisor-metrics etcd-expose-metrics etcd-disable-snapshots etcd-snapshot-name etcd-snapshot-schedule-cron
etcd-snapshot-reconcile-interval etcd-snapshot-retention etcd-snapshot-dir etcd-snapshot-compress etcd-s3
etcd-s3-endpoint etcd-s3-endpoint-ca etcd-s3-skip-ssl-verify etcd-s3-access-key etcd-s3-secret-key
etcd-s3-session-token etcd-s3-bucket etcd-s3-bucket-lookup-type etcd-s3-region etcd-s3-folder etcd-s3-retention
etcd-s3-proxy etcd-s3-config-secret etcd-s3-insecure etcd-s3-timeout secrets-encryption
secrets-encryption-provider system-default-registry
""".split()
)

# Keys that the roles manage from dedicated variables; the free-form map must not set them.
MANAGED_KEYS = {
    "token": "k3s_token",
    "token-file": "k3s_token",
    "agent-token": "k3s_agent_token",
    "agent-token-file": "k3s_agent_token",
    "server": "k3s_registration_address",
    "cluster-init": "the server group size (HA when it has 3, 5 or 7 members)",
    "node-ip": "k3s_node_ip",
    "node-label": "k3s_gpu_node_labels / k3s_node_labels",
    "node-taint": "k3s_gpu_node_taints / k3s_node_taints",
    "tls-san": "k3s_tls_san",
    "cluster-cidr": "k3s_cluster_cidr",
    "service-cidr": "k3s_service_cidr",
    "disable": "k3s_disable",
    "flannel-backend": "k3s_flannel_backend",
    "write-kubeconfig-mode": "(always 0600)",
    "secrets-encryption": "k3s_secrets_encryption",
    "protect-kernel-defaults": "k3s_protect_kernel_defaults",
    "kubelet-arg": "k3s_kubelet_args",
}


# Flags whose value is a credential (a datastore endpoint may carry a password, vpn-auth a join key). A config.yaml
# that sets one is written as a secret file: its text never appears in --diff or in the module's output.
SECRET_FLAGS = frozenset(
    """
token agent-token etcd-s3-access-key etcd-s3-secret-key etcd-s3-session-token datastore-endpoint vpn-auth
""".split()
)


def secret_keys(config):
    """The keys of a config.yaml mapping whose values are credentials, sorted."""
    return sorted(key for key in (config or {}) if key in SECRET_FLAGS)


# Flags of kube-apiserver the k3s role sets from its own variables (Pod Security admission and audit): the free-form
# kube-apiserver-arg may add others, not set these.
MANAGED_APISERVER_FLAGS = {
    "admission-control-config-file": "k3s_pod_security_default / k3s_pod_security_exempt_namespaces",
    "audit-policy-file": "the role's audit policy (roles/k3s/files/audit-policy.yaml)",
    "audit-log-path": "the role (/var/lib/rancher/k3s/server/logs/audit.log)",
    "audit-log-maxage": "k3s_audit_log_maxage",
    "audit-log-maxbackup": "k3s_audit_log_maxbackup",
    "audit-log-maxsize": "k3s_audit_log_maxsize",
}


def arg_name(arg):
    """'audit-log-maxage' from 'audit-log-maxage=30' or '--audit-log-maxage=30'."""
    return str(arg).lstrip("-").split("=", 1)[0]


def known_flags(role):
    return AGENT_FLAGS | SERVER_FLAGS if role == "server" else AGENT_FLAGS | AGENT_ONLY_FLAGS


def extra_config_problems(role, extra):
    """(key, message) for each free-form key that K3s does not know for this role or that a variable manages."""
    problems = []
    for key in sorted(extra or {}):
        if key.startswith("-"):
            problems.append((key, "'%s': write K3s flags without leading dashes" % key))
        elif key not in known_flags(role):
            hint = (
                " (it is a server-only flag)"
                if role == "agent" and key in SERVER_FLAGS
                else " (it is an agent-only flag)"
                if role == "server" and key in AGENT_ONLY_FLAGS
                else ""
            )
            problems.append((key, "'%s' is not a K3s %s flag%s" % (key, role, hint)))
        elif key in MANAGED_KEYS:
            problems.append(
                (key, "'%s' is managed by %s; set that instead of the free-form map" % (key, MANAGED_KEYS[key]))
            )
        elif key == "kube-apiserver-arg":
            values = extra[key] if isinstance(extra[key], list) else [extra[key]]
            for name in sorted({arg_name(v) for v in values} & set(MANAGED_APISERVER_FLAGS)):
                problems.append(
                    (
                        key,
                        "'%s: %s' is managed by %s; set that instead of the free-form map"
                        % (key, name, MANAGED_APISERVER_FLAGS[name]),
                    )
                )
    return problems


# Labels by which the GPU Operator decides which of its components run on a node: nvidia.com/gpu.deploy.<component>
# (controllers/state_manager.go of NVIDIA/gpu-operator). Earlier releases of this collection set three names the
# operator never reads; an inventory that still sets them gets the operator's names and a deprecation warning.
DEPRECATED_GPU_LABELS = {
    "nvidia.com/gpu.deploy-gpu-feature": "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy-container-engine-launcher": "nvidia.com/gpu.deploy.container-toolkit",
    "nvidia.com/gpu.deploy-dcgm": "nvidia.com/gpu.deploy.dcgm",
}


def gpu_node_labels(labels):
    """(labels with the deprecated GPU Operator names replaced by the operator's own, one warning per name)."""
    out = {}
    warnings = []
    for key, value in sorted((labels or {}).items()):
        new = DEPRECATED_GPU_LABELS.get(key)
        if new:
            warnings.append(
                "k3s_gpu_node_labels sets %s, which the GPU Operator does not read: it is set as %s instead; "
                "rename it in the inventory (the old name will stop being accepted)" % (key, new)
            )
            out.setdefault(new, value)
        else:
            out[key] = value
    return out, warnings


def format_labels(labels):
    return ["%s=%s" % (k, v) for k, v in sorted((labels or {}).items())]


def build_config(role, params):
    """The config.yaml mapping for one node.

    params: token_file, node_ip, labels (dict), taints (list), kubelet_args (list), protect_kernel_defaults,
    extra (dict); for servers also: first (bool), ha (bool), server_url, tls_san, cluster_cidr,
    service_cidr, disable, flannel_backend, secrets_encryption, agent_token_file, apiserver_args and
    controller_manager_args (the hardening the role manages, before the free-form map's own args of the same flag);
    for agents: server_url.

    Agents never get the server token: their token file holds the agent token (K3s's agent-token, user node),
    which servers read from agent_token_file.
    """
    if role not in ("server", "agent"):
        raise ValueError("role must be server or agent, got %r" % role)
    config = {"token-file": params["token_file"]}
    if params.get("node_ip"):
        config["node-ip"] = params["node_ip"]
    if role == "server":
        if truthy(params.get("ha")) and truthy(params.get("first")):
            config["cluster-init"] = True
        elif not truthy(params.get("first")):
            config["server"] = params["server_url"]
        config["write-kubeconfig-mode"] = "0600"
        config["tls-san"] = list(params.get("tls_san") or [])
        config["cluster-cidr"] = params["cluster_cidr"]
        config["service-cidr"] = params["service_cidr"]
        config["flannel-backend"] = params["flannel_backend"]
        config["secrets-encryption"] = truthy(params.get("secrets_encryption"))
        if params.get("agent_token_file"):
            config["agent-token-file"] = params["agent_token_file"]
        if params.get("disable"):
            config["disable"] = list(params["disable"])
    else:
        config["server"] = params["server_url"]
    config["protect-kernel-defaults"] = truthy(params.get("protect_kernel_defaults"))
    if params.get("labels"):
        config["node-label"] = format_labels(params["labels"])
    if params.get("taints"):
        config["node-taint"] = list(params["taints"])
    if params.get("kubelet_args"):
        config["kubelet-arg"] = list(params["kubelet_args"])
    bad = [problem[0] for problem in extra_config_problems(role, params.get("extra"))]
    if bad:
        raise ValueError("free-form K3s config has keys that cannot be used: %s" % ", ".join(bad))
    extra = dict(params.get("extra") or {})
    if role == "server":
        for key, managed in (
            ("kube-apiserver-arg", "apiserver_args"),
            ("kube-controller-manager-arg", "controller_manager_args"),
        ):
            own = list(params.get(managed) or [])
            more = extra.pop(key, [])
            args = own + (list(more) if isinstance(more, list) else [more])
            if args:
                config[key] = args
    config.update(extra)
    return config
