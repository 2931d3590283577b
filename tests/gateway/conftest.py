"""The gateway tests' shared control plane: the API server the real Traefik's CRD provider reads (traefik_edge.py)."""

import pytest
import traefik_edge


@pytest.fixture(scope="session")
def edge_api(tmp_path_factory):
    """lab/live/cluster.py's control plane, started once for every test of tests/gateway that needs an edge."""
    with traefik_edge.control_plane(tmp_path_factory.mktemp("api")) as api:
        yield api
