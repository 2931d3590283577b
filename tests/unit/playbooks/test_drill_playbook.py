"""playbooks/drill.yml refuses to run without its confirmation phrase and against any endpoint but the site's
own gateway, before anything is contacted (no cluster exists here: the fault phases need a live site)."""

import pytest
from conftest import run_playbook, write_inventory


def run_drill(tmp_path, extra_vars):
    inventory = write_inventory(
        tmp_path / "inv",
        {"all": {"children": {"k3s_servers": {"hosts": {"cp-1": {"ansible_ssh_executable": "/bin/false"}}}}}},
        {"aiinfra_site": "lab", "drill_kubeconfig": str(tmp_path / "no-kubeconfig")},
    )
    args = []
    for key, value in extra_vars.items():
        args += ["-e", f"{key}={value}"]
    return run_playbook("drill.yml", inventory, callback="default", extra=args)[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "-e drill_confirm=yes-inject-faults-on-lab"),
        ({"drill_confirm": "yes"}, "-e drill_confirm=yes-inject-faults-on-lab"),
        ({"drill_confirm": "yes-inject-faults-on-lab"}, "set traefik_host"),
        (
            {
                "drill_confirm": "yes-inject-faults-on-lab",
                "traefik_host": "llm.example.org",
                "drill_url": "https://elsewhere.example.com/v1/chat/completions",
            },
            "must be the site's gateway",
        ),
    ],
)
def test_drill_refuses_before_contacting_anything(tmp_path, extra, message):
    proc = run_drill(tmp_path, extra)
    assert proc.returncode != 0
    assert message in " ".join(proc.stdout.split()), proc.stdout[-2000:]
    assert "Send the request stream" not in proc.stdout
