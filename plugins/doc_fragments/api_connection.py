# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)


class ModuleDocFragment(object):
    # The actions that speak to the API server in the controller's own process (module_utils k8s/api_client.py) and
    # hand a kubeconfig they cannot speak to kubernetes.core.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of the kubeconfig on the controller.
      - Defaults to the first path of the C(KUBECONFIG) environment variable, then C(~/.kube/config).
    type: path
  context:
    description: The kubeconfig context to use; its current-context by default.
    type: str
  validate_certs:
    description:
      - C(false) skips the check of the API server's certificate. Otherwise the kubeconfig decides (its
        C(insecure-skip-tls-verify)), for this client and for the kubernetes.core module a kubeconfig is handed to
        alike.
    type: bool
  timeout:
    description: Seconds to wait for each answer of the API server.
    type: int
    default: 60
"""
