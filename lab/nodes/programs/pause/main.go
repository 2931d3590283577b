// Command pause is the lab's build of the pause container's behaviour, not the upstream C binary
// (kubernetes/build/pause/linux/pause.c, shipped by K3s as rancher/mirrored-pause). It is a static Go
// program for a FROM-scratch sandbox image in the lab's podman nodes.
//
// Like the upstream pause it holds the pod's namespaces open: it blocks until SIGINT or SIGTERM and then
// exits 0, and as PID 1 of a pod that shares its PID namespace it reaps every child that becomes a zombie
// (SIGCHLD). `pause -v` prints its version and exits 0, as upstream does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const version = "aiinfra-lab-pause 1 (Go build of the pause container's behaviour)"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println(version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case sig := <-stop:
			fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
			os.Exit(0)
		case <-children:
			reap()
		}
	}
}

// reap collects every exited child without blocking; signals coalesce, so one SIGCHLD may stand for many.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
