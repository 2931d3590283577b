"""lab/edgebuild.py: the edge is built from the Traefik module of the pinned K3s release."""

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "lab"))
import crds  # noqa: E402
import edgebuild  # noqa: E402


def test_the_edge_requires_the_traefik_the_pinned_k3s_bundles():
    pin = yaml.safe_load((ROOT / "roles" / "k3s" / "defaults" / "main.yml").read_text())["k3s_version"]
    gomod = (edgebuild.SOURCE / "go.mod").read_text()
    assert edgebuild.traefik_version(gomod) == crds.K3S_EMBEDDED[pin]["traefik"]
    # Traefik's own go.mod replaces gorilla/mux with its fork; a dependent module must repeat it to build.
    assert "github.com/gorilla/mux => github.com/containous/mux" in gomod


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("module x\n\nrequire github.com/traefik/traefik/v3 v3.7.8\n", "v3.7.8"),
        ("module x\n\nrequire (\n\tgithub.com/traefik/traefik/v3 v3.6.12 // indirect\n)\n", "v3.6.12"),
        ("module x\n", ""),
    ],
)
def test_traefik_version_reads_go_mod(text, version):
    assert edgebuild.traefik_version(text) == version


def test_the_cache_key_changes_with_sources_and_go():
    texts = {"main.go": b"a", "go.mod": b"b", "go.sum": b"c"}
    key = edgebuild.source_key(texts, "go1.26.8")
    assert key != edgebuild.source_key(dict(texts, **{"main.go": b"a2"}), "go1.26.8")
    assert key != edgebuild.source_key(texts, "go1.27.3")
    assert key == edgebuild.source_key(dict(reversed(list(texts.items()))), "go1.26.8")
