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
