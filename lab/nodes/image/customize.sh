#!/bin/sh
# Runs inside the debootstrapped root file system (chroot) before it is imported.
# Part of the recipe hash that names the image.
set -eu
# Every node gets its own SSH host keys at first start (labctl provisions them).
rm -f /etc/ssh/ssh_host_*
# An empty machine-id makes systemd generate a unique one per container.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
# Units that cannot work in a container and only add noise to the boot.
systemctl mask systemd-firstboot.service getty@tty1.service console-getty.service \
  systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount >/dev/null 2>&1 || true
systemctl enable ssh.service >/dev/null 2>&1
apt-get clean
# PID 1 of a lab node (labctl starts nodes with it). On this cgroup v1 VM podman leaves every node in the root of
# the host's name=systemd hierarchy, so the nodes' systemd and kubelets would share /init.scope and /kubepods and
# delete each other's pods. Each node moves into a cgroup of its own there, takes a cgroup namespace rooted at it,
# mounts the hierarchy afresh in it (one mount, rooted there), and turns on shared mount propagation (the kubelet's
# volume mounts) before systemd starts.
cat > /usr/local/sbin/aiinfra-lab-init <<'INIT'
#!/bin/sh
set -e
if [ -z "${AIINFRA_LAB_CGNS:-}" ] && mountpoint -q /sys/fs/cgroup/systemd; then
  own=/sys/fs/cgroup/systemd/aiinfra-lab-node-$(hostname)
  mkdir -p "$own"
  echo $$ > "$own/cgroup.procs"
  export AIINFRA_LAB_CGNS=1
  exec unshare --cgroup "$0" "$@"
fi
if [ -n "${AIINFRA_LAB_CGNS:-}" ]; then
  # Podman stacks two mounts (and a release_agent mask) there: runc would pick a stale one's root for pods.
  n=0
  while mountpoint -q /sys/fs/cgroup/systemd && [ "$n" -lt 5 ]; do umount -l /sys/fs/cgroup/systemd; n=$((n + 1)); done
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
fi
mount --make-rshared /
exec /sbin/init "$@"
INIT
chmod 0755 /usr/local/sbin/aiinfra-lab-init
