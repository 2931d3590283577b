# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the site's software comes from: download URLs, image references, charts and the K3s release pins.

Every check returns problems ``{code, severity, host, variable, problem, fix}`` (inventory_spec's shape):

- INSECURE_URL (error): a download URL that is not https (``k3s_release_url``, the chart repositories): anyone on the
  path could replace what is fetched.
- K3S_PIN (error): a ``k3s_sha256_pins`` entry that names no release file or is not a sha256, or disagrees with the
  shipped pin of the same file; K3S_UNPINNED (error): an online install of a release file that neither the shipped
  table (k3s_release.RELEASE_SHA256) nor ``k3s_sha256_pins`` pins, unless ``k3s_allow_unpinned`` (then a warning,
  also named in the stage report).
- IMAGE_DIGEST: an image reference whose ``@`` part is not ``sha256:<64 hex>`` (error), or one pinned by tag only
  (warning: a tag can be pushed again; ``<image>:<tag>@sha256:<digest>`` runs exactly the image the digest names).
- CHART_DIGEST (warning): a chart that K3s's Helm controller fetches online, where no digest is checked (the
  HelmChart resource has no digest field); airgap mode checks ``<role>_chart_sha256`` on the controller.
"""

import re

from ansible_collections.aiinfra.k3s.plugins.module_utils.node import k3s_release
from ansible_collections.aiinfra.k3s.plugins.module_utils.plan.inventory_spec import problem, truthy

SITE = "all"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# name[:tag][@digest]: registry host (with port), path components, tag.
REFERENCE_RE = re.compile(
    r"^(?P<name>(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>.+))?$"
)
# Image variables of the roles (per-model images are read from vllm_models and nim_models).
IMAGE_VARIABLES = ("vllm_image", "litellm_image", "litellm_redis_image", "gpu_verify_vectoradd_image")
MODEL_VARIABLES = ("vllm_models", "nim_models")
# Chart-installing roles: the variable that switches each on (None: always on) and its prefix.
CHARTS = (
    ("gpu_operator", "gpu_operator_enabled"),
    ("cert_manager", "cert_manager_enabled"),
    ("monitoring", "monitoring_enabled"),
    ("autoscaling", None),
)
URL_VARIABLES = ("k3s_release_url", *tuple("%s_chart_repo" % prefix for prefix, _on in CHARTS))
# Which upstream releases publish a digest to pin (docs/security.md repeats it).
DIGEST_SOURCES = {
    "vllm_image": "vLLM's release publishes the image on Docker Hub, whose tag page shows the index digest",
    "litellm_image": "LiteLLM's GitHub release names the ghcr.io image; `crane digest` or the package page gives it",
    "litellm_redis_image": "Docker Hub's official redis image lists the digest of each tag",
    "gpu_verify_vectoradd_image": "NGC's catalog page of the image lists the digest of each tag",
}
VARIABLES = (
    IMAGE_VARIABLES
    + MODEL_VARIABLES
    + URL_VARIABLES
    + tuple("%s_install_mode" % prefix for prefix, _on in CHARTS)
    + tuple("%s_chart_version" % prefix for prefix, _on in CHARTS)
    + tuple(on for _prefix, on in CHARTS if on)
    + ("autoscaling_engine", "gpu_verify_vectoradd", "litellm_enabled", "litellm_redis")
    + ("k3s_version", "k3s_install_mode", "k3s_sha256_pins", "k3s_allow_unpinned")
)


def https_error(url):
    """Why `url` cannot be a download URL, or None: only https (TLS with the host's certificate) is accepted."""
    text = str(url or "").strip()
    scheme, sep, rest = text.partition("://")
    if not sep or not rest.split("/", 1)[0]:
        return "%r is not a URL (https://host/path)" % text
    if scheme.lower() != "https":
        return "%s uses %s://: anyone on the path to %s could replace what is downloaded" % (
            text,
            scheme.lower(),
            rest.split("/", 1)[0],
        )
    return None


def url_problems(variable, url, host=SITE):
    error = https_error(url)
    if not error:
        return []
    host_part = str(url).partition("://")[2].split("/", 1)[0] or str(url)
    return [
        problem(
            "INSECURE_URL",
            host,
            variable,
            "%s %s" % (variable, error),
            "use https://%s%s (the same path over TLS), or a mirror that serves https"
            % (
                host_part,
                ("/" + str(url).partition("://")[2].split("/", 1)[1]) if "/" in str(url).partition("://")[2] else "",
            ),
        )
    ]


def parse_image(reference):
    """{name, tag, digest} of an image reference, or None when it is not one."""
    match = REFERENCE_RE.match(str(reference or "").strip())
    if not match:
        return None
    return {"name": match.group("name"), "tag": match.group("tag"), "digest": match.group("digest")}


def image_problems(variable, reference, host=SITE, what=None):
    """An IMAGE_DIGEST error for a malformed digest, a warning for a reference pinned by tag only."""
    label = what or variable
    parsed = parse_image(reference)
    if parsed is None:
        return [problem("IMAGE_DIGEST", host, variable, "%s is %r, not an image reference" % (label, reference), "")]
    if parsed["digest"] is not None:
        if not DIGEST_RE.match(parsed["digest"]):
            return [
                problem(
                    "IMAGE_DIGEST",
                    host,
                    variable,
                    "%s is %r: its digest %r is not sha256:<64 lower-case hex digits>"
                    % (label, reference, parsed["digest"]),
                    "write %s%s@sha256:<digest the registry lists for it>"
                    % (parsed["name"], ":" + parsed["tag"] if parsed["tag"] else ""),
                )
            ]
        return []
    source = DIGEST_SOURCES.get(variable, "the registry lists the digest of each tag")
    return [
        problem(
            "IMAGE_DIGEST",
            host,
            variable,
            "%s %s is pinned by tag only: a tag pushed again upstream changes what the nodes run" % (label, reference),
            "append the digest: %s:%s@sha256:<digest> (%s)" % (parsed["name"], parsed["tag"] or "<tag>", source),
            "warning",
        )
    ]


def chart_problems(prefix, values, host=SITE):
    if values.get("%s_install_mode" % prefix, "online") != "online":
        return []
    return [
        problem(
            "CHART_DIGEST",
            host,
            "%s_install_mode" % prefix,
            "the %s chart %s is fetched online by K3s's Helm controller from %s with no digest check (a HelmChart "
            "has no digest field; the repository's index.yaml lists one, from the same place as the chart)"
            % (prefix, values.get("%s_chart_version" % prefix), values.get("%s_chart_repo" % prefix)),
            "set %s_install_mode to airgap with the chart archive in the airgap directory and %s_chart_sha256 (its "
            "sha256, taken from a source other than the repository), or accept the risk" % (prefix, prefix),
            "warning",
        )
    ]


def k3s_pin_problems(
    version, install_mode, operator_pins, arches=None, online_images=False, allow_unpinned=False, host=SITE
):
    """K3S_PIN for operator pins that cannot work; K3S_UNPINNED for online release files nothing pins.

    `arches`: the nodes' architectures when known (the artifacts stage); at validation (no facts) the binary of the
    release's amd64 or arm64 build must be pinned for at least one architecture.
    """
    out = []
    shipped = k3s_release.RELEASE_SHA256.get(version, {})
    for name, digest in sorted((operator_pins or {}).items()):
        digest = str(digest).strip().lower()
        if k3s_release.artifact_arch(str(name)) is None:
            out.append(
                problem(
                    "K3S_PIN",
                    host,
                    "k3s_sha256_pins",
                    "%r names no file of a K3s release: the pin would never be checked" % name,
                    "use the file names of the release: k3s, k3s-arm64, k3s-airgap-images-<arch>.tar.zst, "
                    "sha256sum-<arch>.txt",
                )
            )
        elif not k3s_release.SHA256_RE.match(digest):
            out.append(
                problem(
                    "K3S_PIN",
                    host,
                    "k3s_sha256_pins",
                    "the pin of %s is %r, not a sha256" % (name, digest),
                    "give the 64 hex digits the release's sha256sum-<arch>.txt lists for %s" % name,
                )
            )
        elif install_mode == "online" and name in shipped and shipped[name] != digest:
            out.append(
                problem(
                    "K3S_PIN",
                    host,
                    "k3s_sha256_pins",
                    "the pin of %s (%s) differs from the sha256 the collection ships for K3s %s (%s)"
                    % (name, digest, version, shipped[name]),
                    "remove the pin, or check both against the release and report the shipped one if it is wrong",
                )
            )
    if install_mode != "online" or not k3s_release.is_k3s_version(version):
        return out  # a malformed version is inventory_check's problem
    pins = k3s_release.release_pins(version, operator_pins)
    if arches is None:
        needed = [[k3s_release.binary_name(a) for a in ("amd64", "arm64")]]
    else:
        needed = [[k3s_release.binary_name(a)] for a in arches]
        if truthy(online_images):
            needed += [["k3s-airgap-images-%s.tar.zst" % a] for a in arches]
    missing = [
        names[0] if len(names) == 1 else " or ".join(names) for names in needed if not any(n in pins for n in names)
    ]
    if missing:
        out.append(
            problem(
                "K3S_UNPINNED",
                host,
                "k3s_sha256_pins",
                "K3s %s: %s %s no sha256 pinned in the collection or in k3s_sha256_pins, so an online install would "
                "trust a checksum file downloaded from the same place as the binary"
                % (version, ", ".join(missing), "has" if len(missing) == 1 else "have"),
                "add the release's sha256 of each to k3s_sha256_pins (from sha256sum-<arch>.txt of the release, "
                "checked out of band), install from an airgap bundle, or set k3s_allow_unpinned: true to accept it "
                "(the stage report names it)",
                "warning" if truthy(allow_unpinned) else "error",
            )
        )
    return out


def supply_chain_problems(values):
    """Every problem of the site's sources: values holds the effective value of each name in VARIABLES."""
    out = []
    for variable in URL_VARIABLES:
        if variable in values:
            out += url_problems(variable, values[variable])
    out += k3s_pin_problems(
        values.get("k3s_version"),
        values.get("k3s_install_mode", "online"),
        values.get("k3s_sha256_pins") or {},
        allow_unpinned=values.get("k3s_allow_unpinned", False),
    )
    used = {
        "vllm_image": bool(values.get("vllm_models")),
        "litellm_image": truthy(values.get("litellm_enabled", True)),
        "litellm_redis_image": truthy(values.get("litellm_enabled", True)) and values.get("litellm_redis") == "deploy",
        "gpu_verify_vectoradd_image": truthy(values.get("gpu_verify_vectoradd", True)),
    }
    for variable in IMAGE_VARIABLES:
        if variable in values and used.get(variable, True):
            out += image_problems(variable, values[variable])
    for variable in MODEL_VARIABLES:
        for model in values.get(variable) or []:
            if isinstance(model, dict) and model.get("image"):
                what = "the image of %s" % (model.get("served_name") or "a model")
                out += image_problems(variable, model["image"], what=what)
    for prefix, switch in CHARTS:
        if switch and not truthy(values.get(switch, True)):
            continue
        if prefix == "autoscaling" and values.get("autoscaling_engine", "keda") != "keda":
            continue
        out += chart_problems(prefix, values)
    return out
