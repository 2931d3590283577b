# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build /etc/rancher/k3s/config.yaml for a server or an agent from structured variables.

Keys are K3s flags without the leading dashes. Managed keys come from dedicated variables; the
free-form map adds any other flag and may not silently override a managed one.
"""

# Flags every node (server or agent) accepts in config.yaml.
AGENT_FLAGS = frozenset(
    """
token token-file server data-dir node-name with-node-id node-label node-taint image-credential-provider-bin-dir
image-credential-provider-config selinux lb-server-port protect-kernel-defaults snapshotter private-registry
disable-default-registry-endpoint node-ip node-external-ip node-internal-dns node-external-dns resolv-conf
flannel-iface flannel-conf flannel-cni-conf kubelet-arg kube-proxy-arg rootless prefer-bundled-bin
container-runtime-endpoint default-runtime image-service-endpoint pause-image docker airgap-extra-registry
vpn-auth vpn-auth-file enable-pprof debug log alsologtostderr v vmodule bind-address
""".split()
)

# Flags only servers accept.
SERVER_FLAGS = frozenset(
    """
cluster-init cluster-reset cluster-reset-restore-path cluster-cidr service-cidr service-node-port-range
cluster-dns cluster-domain flannel-backend flannel-ipv6-masq flannel-external-ip egress-selector-mode
servicelb-namespace write-kubeconfig write-kubeconfig-mode write-kubeconfig-group tls-san tls-san-security
advertise-address advertise-port https-listen-port supervisor-port apiserver-port apiserver-bind-address
agent-token agent-token-file datastore-endpoint datastore-cafile datastore-certfile datastore-keyfile
etcd-expose-metrics etcd-disable-snapshots etcd-snapshot-name etcd-snapshot-schedule-cron etcd-snapshot-retention
etcd-snapshot-dir etcd-snapshot-compress etcd-arg etcd-s3 etcd-s3-endpoint etcd-s3-endpoint-ca
etcd-s3-skip-ssl-verify etcd-s3-access-key etcd-s3-secret-key etcd-s3-bucket etcd-s3-region etcd-s3-folder
etcd-s3-proxy etcd-s3-config-secret etcd-s3-insecure etcd-s3-timeout etcd-s3-bucket-lookup-type
default-local-storage-path disable disable-scheduler disable-cloud-controller disable-kube-proxy
disable-network-policy disable-helm-controller disable-apiserver disable-controller-manager disable-etcd
embedded-registry supervisor-metrics helm-job-image kube-apiserver-arg kube-scheduler-arg
kube-controller-manager-arg kube-cloud-controller-manager-arg secrets-encryption secrets-encryption-provider
system-default-registry enable-pprof kine-tls node-taint-control-plane
""".split()
)

# Keys that the roles manage from dedicated variables; the free-form map must not set them.
MANAGED_KEYS = {
    "token": "k3s_token",
    "token-file": "k3s_token",
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


def known_flags(role):
    return AGENT_FLAGS | SERVER_FLAGS if role == "server" else AGENT_FLAGS


def extra_config_problems(role, extra):
    """(key, message) for each free-form key that K3s does not know for this role or that a variable manages."""
    problems = []
    for key in sorted(extra or {}):
        if key.startswith("-"):
            problems.append((key, "'%s': write K3s flags without leading dashes" % key))
        elif key not in known_flags(role):
            hint = " (it is a server-only flag)" if role == "agent" and key in SERVER_FLAGS else ""
            problems.append((key, "'%s' is not a K3s %s flag%s" % (key, role, hint)))
        elif key in MANAGED_KEYS:
            problems.append(
                (key, "'%s' is managed by %s; set that instead of the free-form map" % (key, MANAGED_KEYS[key]))
            )
    return problems


def as_bool(value):
    """Booleans as Ansible passes them: real bools, or strings such as 'True', 'false', 'yes'."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def format_labels(labels):
    return ["%s=%s" % (k, v) for k, v in sorted((labels or {}).items())]


def build_config(role, params):
    """The config.yaml mapping for one node.

    params: token_file, node_ip, labels (dict), taints (list), kubelet_args (list), protect_kernel_defaults,
    extra (dict); for servers also: first (bool), ha (bool), server_url, tls_san, cluster_cidr,
    service_cidr, disable, flannel_backend, secrets_encryption; for agents: server_url.
    """
    if role not in ("server", "agent"):
        raise ValueError("role must be server or agent, got %r" % role)
    config = {"token-file": params["token_file"]}
    if params.get("node_ip"):
        config["node-ip"] = params["node_ip"]
    if role == "server":
        if as_bool(params.get("ha")) and as_bool(params.get("first")):
            config["cluster-init"] = True
        elif not as_bool(params.get("first")):
            config["server"] = params["server_url"]
        config["write-kubeconfig-mode"] = "0600"
        config["tls-san"] = list(params.get("tls_san") or [])
        config["cluster-cidr"] = params["cluster_cidr"]
        config["service-cidr"] = params["service_cidr"]
        config["flannel-backend"] = params["flannel_backend"]
        config["secrets-encryption"] = as_bool(params.get("secrets_encryption"))
        if params.get("disable"):
            config["disable"] = list(params["disable"])
    else:
        config["server"] = params["server_url"]
    config["protect-kernel-defaults"] = as_bool(params.get("protect_kernel_defaults"))
    if params.get("labels"):
        config["node-label"] = format_labels(params["labels"])
    if params.get("taints"):
        config["node-taint"] = list(params["taints"])
    if params.get("kubelet_args"):
        config["kubelet-arg"] = list(params["kubelet_args"])
    bad = [problem[0] for problem in extra_config_problems(role, params.get("extra"))]
    if bad:
        raise ValueError("free-form K3s config has keys that cannot be used: %s" % ", ".join(bad))
    config.update(params.get("extra") or {})
    return config


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
