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
# PID 1 of a lab node (labctl starts nodes with it): podman mounts the host's whole name=systemd cgroup
# hierarchy into every node on this cgroup v1 VM, so the nodes' systemd and kubelets would share /init.scope and
# /kubepods and delete each other's pods. A private name=systemd hierarchy, and shared mount propagation for the
# kubelet's volume mounts, before systemd starts.
cat > /usr/local/sbin/aiinfra-lab-init <<'INIT'
#!/bin/sh
if mountpoint -q /sys/fs/cgroup/systemd; then
  umount /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
fi
mount --make-rshared /
exec /sbin/init "$@"
INIT
chmod 0755 /usr/local/sbin/aiinfra-lab-init
