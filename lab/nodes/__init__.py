"""The podman node lab: Debian hosts in podman containers, real kubelets, the K3s stand-in bundle (see lab/__init__.py)."""
