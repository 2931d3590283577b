package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
)

// config is what the flags say; parseFlags refuses anything the kubelet or the plugin could not use.
type config struct {
	resource  string
	count     int
	replicas  int
	pluginDir string
}

// resourceName is an extended resource name as the kubelet accepts it: a DNS domain prefix and a name.
var resourceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// maxDevices bounds count*replicas: a typo should fail, not advertise a million devices.
const maxDevices = 4096

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("aiinfra-lab-device-plugin", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // main logs the error, prefixed like every other line
	cfg := config{}
	fs.StringVar(&cfg.resource, "resource", "nvidia.com/gpu", "extended resource to advertise")
	fs.IntVar(&cfg.count, "count", 1, "physical GPUs to pretend the node has")
	fs.IntVar(&cfg.replicas, "replicas", 1, "time-slicing replicas per GPU")
	fs.StringVar(&cfg.pluginDir, "plugin-dir", "/var/lib/kubelet/device-plugins", "the kubelet's device-plugin directory")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	case !resourceName.MatchString(cfg.resource) || strings.HasPrefix(cfg.resource, "kubernetes.io/"):
		return cfg, fmt.Errorf("--resource %q is not an extended resource name (DOMAIN/NAME, e.g. nvidia.com/gpu)", cfg.resource)
	case cfg.count < 1:
		return cfg, fmt.Errorf("--count %d: must be at least 1", cfg.count)
	case cfg.replicas < 1:
		return cfg, fmt.Errorf("--replicas %d: must be at least 1", cfg.replicas)
	case cfg.count*cfg.replicas > maxDevices:
		return cfg, fmt.Errorf("--count %d x --replicas %d is more than %d devices", cfg.count, cfg.replicas, maxDevices)
	case !filepath.IsAbs(cfg.pluginDir):
		return cfg, fmt.Errorf("--plugin-dir %q must be an absolute path", cfg.pluginDir)
	}
	return cfg, nil
}

// deviceIDs are the IDs advertised: GPU-lab-<i>, or GPU-lab-<i>::<r> for each time-slicing replica.
func deviceIDs(count, replicas int) []string {
	ids := make([]string, 0, count*replicas)
	for i := 0; i < count; i++ {
		if replicas == 1 {
			ids = append(ids, fmt.Sprintf("GPU-lab-%d", i))
			continue
		}
		for r := 0; r < replicas; r++ {
			ids = append(ids, fmt.Sprintf("GPU-lab-%d::%d", i, r))
		}
	}
	return ids
}

// physicalID is the GPU a device (or a replica of it) stands for: GPU-lab-1::3 -> GPU-lab-1.
func physicalID(id string) string {
	if i := strings.Index(id, "::"); i >= 0 {
		return id[:i]
	}
	return id
}

// visibleDevices is NVIDIA_VISIBLE_DEVICES for a set of devices: their physical GPUs, each once, in order.
func visibleDevices(ids []string) string {
	seen := map[string]bool{}
	out := []string{}
	for _, id := range ids {
		if gpu := physicalID(id); !seen[gpu] {
			seen[gpu] = true
			out = append(out, gpu)
		}
	}
	return strings.Join(out, ",")
}

// preferred picks size devices: the ones that must be included first, then the available ones in order.
func preferred(available, mustInclude []string, size int) []string {
	out := []string{}
	taken := map[string]bool{}
	for _, list := range [][]string{mustInclude, available} {
		for _, id := range list {
			if len(out) == size {
				return out
			}
			if !taken[id] {
				taken[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}
