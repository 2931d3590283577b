"""The live control plane (kube-apiserver, etcd, controllers, kwok nodes), upstream CRDs and charts, and the pod
runtime sandbox: what tests/live, tests/gateway and tests/runtime run against (see lab/__init__.py)."""
