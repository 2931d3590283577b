"""plugins/module_utils/k8s/edge.py: the public URLs the site plan shows, and a prefix that doubles the public paths
(issue 29 item 10)."""

import pytest

from ansible_collections.aiinfra.k3s.plugins.module_utils.k8s import edge

GOOD = {
    "host": "api.example.internal",
    "path_prefix": "/api/litellm",
    "rate_average": 100,
    "rate_burst": 200,
    "rate_period": "1s",
    "public_paths": list(edge.PUBLIC_PATHS),
    "expose_admin": False,
}


@pytest.mark.parametrize("prefix", ["/v1", "/v1/chat"])
def test_a_prefix_the_public_paths_already_start_with_is_refused_with_the_fix(prefix):
    (problem,) = edge.edge_problems(dict(GOOD, path_prefix=prefix), None)
    assert problem.startswith("traefik_path_prefix is %r and the public paths already start with it" % prefix)
    assert "/v1/chat/completions" in problem
    assert "set traefik_path_prefix to / to serve https://api.example.internal/v1/" in problem
    assert "https://api.example.internal/api/v1/" in problem


def test_the_issue_site_names_the_doubled_url():
    (problem,) = edge.edge_problems(dict(GOOD, path_prefix="/v1"), None)
    assert "clients would call https://api.example.internal/v1/v1/chat/completions" in problem


@pytest.mark.parametrize("prefix", ["/", "", "/api/litellm", "/v10", "/api"])
def test_prefixes_that_do_not_overlap_pass(prefix):
    assert edge.edge_problems(dict(GOOD, path_prefix=prefix), None) == []


def test_the_overlap_counts_the_default_paths_when_the_admin_routes_are_exposed():
    problems = edge.edge_problems(dict(GOOD, path_prefix="/v1", expose_admin=True, public_paths=None), None)
    assert len(problems) == 1 and "traefik_path_prefix is '/v1'" in problems[0]


def values(**over):
    out = {
        "traefik_host": "api.example.internal",
        "traefik_path_prefix": "/api/litellm",
        "traefik_public_paths": ["/v1/chat/completions", "/v1/models"],
        "traefik_expose_admin": False,
    }
    out.update(over)
    return out


@pytest.mark.parametrize(
    ("over", "urls"),
    [
        (
            {},
            [
                "https://api.example.internal/api/litellm/v1/chat/completions",
                "https://api.example.internal/api/litellm/v1/models",
            ],
        ),
        (
            {"traefik_path_prefix": "/"},
            ["https://api.example.internal/v1/chat/completions", "https://api.example.internal/v1/models"],
        ),
        (
            {"traefik_path_prefix": "", "traefik_public_paths": ["/v1/models"]},
            ["https://api.example.internal/v1/models"],
        ),
        ({"traefik_expose_admin": True}, ["https://api.example.internal/api/litellm/"]),
        ({"traefik_expose_admin": "yes", "traefik_path_prefix": "/"}, ["https://api.example.internal/"]),
        ({"traefik_host": ""}, []),
        ({"traefik_host": None}, []),
    ],
)
def test_public_urls(over, urls):
    assert edge.public_urls(values(**over)) == urls


def test_public_urls_default_to_the_collection_paths():
    urls = edge.public_urls({"traefik_host": "h.example.org", "traefik_path_prefix": "/"})
    assert urls == ["https://h.example.org" + p for p in edge.PUBLIC_PATHS]


def test_public_urls_match_the_route_rule():
    """Each URL's path is one the IngressRoute's rule matches (the same prefix and paths)."""
    v = values()
    rule = edge.route_rule(v["traefik_host"], v["traefik_path_prefix"], v["traefik_public_paths"])
    for url in edge.public_urls(v):
        assert "Path(`%s`)" % url.split("api.example.internal", 1)[1] in rule


@pytest.mark.parametrize("bad", [None, {}, {"traefik_host": 5}, {"traefik_host": "h", "traefik_public_paths": 3}])
def test_public_urls_never_raise(bad):
    edge.public_urls(bad)
