// Command aiinfra-lab-device-plugin is a STAND-IN for the NVIDIA device plugin in the lab's podman nodes,
// which have no GPU. It speaks the kubelet's real device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/
// v1beta1) so the kubelet advertises `nvidia.com/gpu` (or --resource) and the scheduler, quotas, time-slicing
// replicas and the collection's GPU placement logic can be exercised for real; containers get environment
// variables only (NVIDIA_VISIBLE_DEVICES, AIINFRA_LAB_STANDIN=1), never a device node or a mount.
//
//	aiinfra-lab-device-plugin --resource nvidia.com/gpu --count 2 --replicas 4 \
//	    --plugin-dir /var/lib/kubelet/device-plugins
//
// It advertises count*replicas healthy devices (GPU-lab-<i>, or GPU-lab-<i>::<r> when replicas > 1), serves
// on <plugin-dir>/aiinfra-lab-gpu.sock, registers with <plugin-dir>/kubelet.sock, and registers again when the
// kubelet restarts (kubelet.sock re-created: polled every 2 s by inode and mtime).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// logPrefix starts every line this program logs.
const logPrefix = "aiinfra-lab-device-plugin (stand-in, no GPU): "

// socketName is the plugin's own socket in the plugin directory (the Register endpoint).
const socketName = "aiinfra-lab-gpu.sock"

// pollInterval is how often the kubelet socket is checked for a kubelet restart.
const pollInterval = 2 * time.Second

func main() {
	log.SetPrefix(logPrefix)
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		log.Print(usage)
		return
	}
	if err != nil {
		log.Printf("bad flags: %v", err)
		log.Print(usage)
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	if err := run(cfg, stop); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

// run serves and registers the plugin until a signal arrives, starting over whenever the kubelet restarts.
func run(cfg config, stop <-chan os.Signal) error {
	plugin := newPlugin(cfg)
	log.Printf("advertising %d %s devices (%d GPUs x %d replicas): %v",
		len(plugin.devices), cfg.resource, cfg.count, cfg.replicas, deviceIDs(cfg.count, cfg.replicas))
	kubeletSock := filepath.Join(cfg.pluginDir, "kubelet.sock")
	ownSock := filepath.Join(cfg.pluginDir, socketName)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var registered fileStamp // the kubelet.sock this plugin last registered with
	waiting := false
	for {
		if err := reconcile(plugin, cfg.resource, kubeletSock, ownSock, &registered); err != nil {
			return err
		}
		if registered == (fileStamp{}) && !waiting {
			log.Printf("waiting for the kubelet at %s", kubeletSock)
			waiting = true
		}
		select {
		case sig := <-stop:
			log.Printf("got %v, stopping", sig)
			plugin.stop()
			_ = os.Remove(ownSock)
			return nil
		case <-ticker.C:
		}
	}
}

// reconcile serves and registers when kubelet.sock is new (first start, kubelet restarted) or the plugin's own
// socket is gone; a kubelet that is not there yet or refuses the registration is tried again on the next poll.
func reconcile(plugin *plugin, resource, kubeletSock, ownSock string, registered *fileStamp) error {
	now, err := stamp(kubeletSock)
	if err != nil {
		return nil
	}
	_, ownErr := os.Stat(ownSock)
	if now == *registered && ownErr == nil {
		return nil
	}
	if *registered != (fileStamp{}) {
		log.Printf("%s was re-created (kubelet restarted) or %s is gone: serving and registering again", kubeletSock, ownSock)
	}
	if err := plugin.serve(ownSock); err != nil {
		return err
	}
	if err := register(kubeletSock, resource); err != nil {
		log.Printf("register with %s failed, retrying in %s: %v", kubeletSock, pollInterval, err)
		*registered = fileStamp{}
		return nil
	}
	*registered = now
	log.Printf("registered %s with the kubelet at %s (endpoint %s)", resource, kubeletSock, socketName)
	return nil
}

// fileStamp tells one incarnation of a socket file from the next.
type fileStamp struct {
	inode uint64
	mtime int64
}

func stamp(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, fmt.Errorf("no inode for %s", path)
	}
	return fileStamp{inode: st.Ino, mtime: info.ModTime().UnixNano()}, nil
}

const usage = `usage: aiinfra-lab-device-plugin [--resource nvidia.com/gpu] [--count N] [--replicas R] [--plugin-dir DIR]`
