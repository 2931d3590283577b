#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, aiinfra.k3s developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: gpu_facts
short_description: Report the physical NVIDIA GPUs of a host from nvidia-smi
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=index,uuid,name,memory.total,mig.mode.current,driver_version,pci.bus_id
    --format=csv,noheader,nounits), C(nvidia-smi -L) when MIG is enabled (MIG devices and profiles) and
    C(nvidia-smi -q) for the CUDA version, and returns them as the C(aiinfra_gpus) fact.
  - Where the NVIDIA GPU Operator installs the driver (its C(driver.enabled)), nvidia-smi is not on the host but in
    the operator's driver container, whose root the operator mounts on the host (C(/run/nvidia/driver)). With
    O(driver_root) set to that root the module runs C(chroot <driver_root> nvidia-smi ...), as NVIDIA documents;
    chroot needs root, so such a task needs C(become).
  - Without nvidia-smi (not in PATH, not at an absolute O(nvidia_smi), not in O(driver_root)), or when it cannot
    reach the driver, the fact says so in C(status) and C(message); the task fails only when O(expect_gpus) is true
    (a host that must have GPUs).
author:
  - aiinfra.k3s developers (@aiinfra)
options:
  expect_gpus:
    description: Fail when no GPU can be read (no nvidia-smi, no driver, driver/library mismatch, zero GPUs).
    type: bool
    default: false
  nvidia_smi:
    description:
      - nvidia-smi executable, looked up in PATH when not absolute.
      - With O(driver_root), a path inside that root when absolute, else looked up in its C(/usr/bin), C(/usr/sbin),
        C(/bin), C(/sbin), C(/usr/local/bin) and C(/usr/local/nvidia/bin).
    type: str
    default: nvidia-smi
  driver_root:
    description:
      - Root of the driver container on the host, when the GPU Operator owns the driver (C(/run/nvidia/driver));
        nvidia-smi is then run from there through chroot (needs root). Empty, the host's own nvidia-smi.
      - A root without nvidia-smi (the operator's driver pod has not installed the driver yet) gives
        C(no_nvidia_smi).
    type: path
    default: ""
extends_documentation_fragment:
  - aiinfra.k3s.attributes.read_only
"""

EXAMPLES = r"""
- name: Read the GPUs of the GPU nodes, failing where none can be read
  aiinfra.k3s.gpu_facts:
    expect_gpus: true

- name: Read the GPUs where the GPU Operator owns the driver (nvidia-smi in its driver container)
  aiinfra.k3s.gpu_facts:
    driver_root: /run/nvidia/driver
    expect_gpus: true
  become: true

- name: Physical GPU count
  ansible.builtin.debug:
    msg: "{{ ansible_facts.aiinfra_gpus.count }} x {{ ansible_facts.aiinfra_gpus.gpus[0].name }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts set on the host.
  returned: always
  type: dict
  contains:
    aiinfra_gpus:
      description:
        - C(status) (C(ok), C(no_nvidia_smi), C(no_driver), C(driver_mismatch), C(no_gpus), C(error)), C(message),
          C(count), C(gpus) (index, uuid, name, memory_total_mib, mig_mode, driver_version, pci_bus_id), C(mig_enabled),
          C(mig_devices) (gpu_index, gpu_uuid, profile, index, uuid), C(mig_profiles) (profile to count),
          C(driver_version), C(cuda_version).
      type: dict
      sample:
        status: ok
        message: 1 GPU(s)
        count: 1
        gpus: [{index: 0, uuid: GPU-5f8a1c3e-0000-0000-0000-000000000000, name: NVIDIA L4, memory_total_mib: 23034,
                mig_mode: null, driver_version: 550.54.15, pci_bus_id: "00000000:01:00.0"}]
        mig_enabled: false
        mig_devices: []
        mig_profiles: {}
        driver_version: 550.54.15
        cuda_version: "12.4"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aiinfra.k3s.plugins.module_utils.gpu.facts import (
    GpuFactsError,
    empty_facts,
    nvidia_smi_argv,
    read_gpus,
)


def read_facts(module):
    try:
        smi = nvidia_smi_argv(module.params["nvidia_smi"], module.params["driver_root"], module.get_bin_path)
    except GpuFactsError as exc:
        return empty_facts(exc.status, str(exc))
    return read_gpus(smi, module.run_command)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expect_gpus=dict(type="bool", default=False),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            driver_root=dict(type="path", default=""),
        ),
        supports_check_mode=True,
    )
    try:
        facts = read_facts(module)
    except GpuFactsError as exc:
        facts = empty_facts(exc.status, str(exc))
    if module.params["expect_gpus"] and facts["status"] != "ok":
        module.fail_json(
            msg="this host is expected to have GPUs but none can be read: %s" % facts["message"],
            ansible_facts={"aiinfra_gpus": facts},
        )
    module.exit_json(changed=False, ansible_facts={"aiinfra_gpus": facts})


if __name__ == "__main__":
    main()
