package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestDeviceIDsNameReplicasOnlyWhenSliced(t *testing.T) {
	if got := deviceIDs(2, 1); !reflect.DeepEqual(got, []string{"GPU-lab-0", "GPU-lab-1"}) {
		t.Fatalf("deviceIDs(2, 1) = %v", got)
	}
	got := deviceIDs(2, 3)
	if len(got) != 6 || got[0] != "GPU-lab-0::0" || got[5] != "GPU-lab-1::2" {
		t.Fatalf("deviceIDs(2, 3) = %v", got)
	}
}

func TestVisibleDevicesAreThePhysicalGPUsOnce(t *testing.T) {
	got := visibleDevices([]string{"GPU-lab-1::0", "GPU-lab-1::3", "GPU-lab-0::2"})
	if got != "GPU-lab-1,GPU-lab-0" {
		t.Fatalf("visibleDevices = %q", got)
	}
}

func TestPreferredTakesMustIncludeFirstThenAvailable(t *testing.T) {
	got := preferred([]string{"a", "b", "c", "d"}, []string{"c"}, 2)
	if !reflect.DeepEqual(got, []string{"c", "a"}) {
		t.Fatalf("preferred = %v", got)
	}
}

func TestBadFlagsAreRefusedByName(t *testing.T) {
	cases := map[string][]string{
		"--count":      {"--count", "0"},
		"--replicas":   {"--replicas", "-1"},
		"--resource":   {"--resource", "gpu"},
		"--plugin-dir": {"--plugin-dir", "relative/dir"},
		"unexpected":   {"extra"},
		"more than":    {"--count", "100", "--replicas", "100"},
	}
	for want, args := range cases {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseFlags(%v) = %v, want an error naming %s", args, err, want)
		}
	}
	cfg, err := parseFlags([]string{"--count", "2", "--replicas", "4"})
	if err != nil || cfg.resource != "nvidia.com/gpu" || cfg.pluginDir != "/var/lib/kubelet/device-plugins" {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}
