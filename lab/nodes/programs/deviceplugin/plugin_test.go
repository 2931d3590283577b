package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the kubelet's Registration service on <dir>/kubelet.sock; it reports each registration.
type fakeKubelet struct {
	api.UnimplementedRegistrationServer
	requests chan *api.RegisterRequest
	server   *grpc.Server
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(sock)
	listener, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{requests: make(chan *api.RegisterRequest, 4), server: grpc.NewServer()}
	api.RegisterRegistrationServer(k.server, k)
	go func() { _ = k.server.Serve(listener) }()
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *api.RegisterRequest) (*api.Empty, error) {
	k.requests <- req
	return &api.Empty{}, nil
}

func (k *fakeKubelet) await(t *testing.T) *api.RegisterRequest {
	t.Helper()
	select {
	case req := <-k.requests:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
		return nil
	}
}

func TestRegistersServesAndRegistersAgainAfterAKubeletRestart(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "dp") // unix socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubelet := startKubelet(t, dir)
	stop := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- run(config{resource: "nvidia.com/gpu", count: 2, replicas: 2, pluginDir: dir}, stop) }()

	req := kubelet.await(t)
	if req.Version != api.Version || req.Endpoint != socketName || req.ResourceName != "nvidia.com/gpu" {
		t.Fatalf("register request %+v", req)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, socketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := api.NewDevicePluginClient(conn)
	stream, err := client.ListAndWatch(context.Background(), &api.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil || len(list.Devices) != 4 || list.Devices[3].ID != "GPU-lab-1::1" || list.Devices[3].Health != api.Healthy {
		t.Fatalf("ListAndWatch: %v, %v", list, err)
	}
	alloc, err := client.Allocate(context.Background(), &api.AllocateRequest{
		ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"GPU-lab-1::0"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := alloc.ContainerResponses[0]
	if resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-lab-1" || resp.Envs["AIINFRA_LAB_STANDIN"] != "1" ||
		len(resp.Devices) != 0 || len(resp.Mounts) != 0 {
		t.Fatalf("Allocate: %+v", resp)
	}
	if _, err := client.Allocate(context.Background(), &api.AllocateRequest{
		ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"GPU-lab-9"}}},
	}); err == nil {
		t.Fatal("Allocate of an unknown device succeeded")
	}

	kubelet.server.Stop() // the kubelet restarts: a new kubelet.sock appears
	kubelet = startKubelet(t, dir)
	defer kubelet.server.Stop()
	kubelet.await(t)

	stop <- os.Interrupt
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, socketName)); !os.IsNotExist(err) {
		t.Fatalf("the plugin socket is left behind: %v", err)
	}
}
