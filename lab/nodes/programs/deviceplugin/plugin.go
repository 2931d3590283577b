package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// plugin implements the kubelet's DevicePlugin service for a fixed set of healthy stand-in devices.
type plugin struct {
	api.UnimplementedDevicePluginServer
	devices []*api.Device
	known   map[string]bool

	mu     sync.Mutex
	server *grpc.Server
	done   chan struct{} // closed when the current server stops: ends the ListAndWatch streams
}

func newPlugin(cfg config) *plugin {
	p := &plugin{known: map[string]bool{}}
	for _, id := range deviceIDs(cfg.count, cfg.replicas) {
		p.devices = append(p.devices, &api.Device{ID: id, Health: api.Healthy})
		p.known[id] = true
	}
	return p
}

// serve (re)creates the plugin's socket and serves the DevicePlugin service on it.
func (p *plugin) serve(socket string) error {
	p.stop()
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove stale %s: %w", socket, err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", socket, err)
	}
	server := grpc.NewServer()
	api.RegisterDevicePluginServer(server, p)
	p.mu.Lock()
	p.server, p.done = server, make(chan struct{})
	p.mu.Unlock()
	go func() {
		if err := server.Serve(listener); err != nil {
			log.Printf("server on %s ended: %v", socket, err)
		}
	}()
	log.Printf("serving on %s", socket)
	return nil
}

// stop ends the current server, if any, and the ListAndWatch streams it serves.
func (p *plugin) stop() {
	p.mu.Lock()
	server, done := p.server, p.done
	p.server = nil
	p.mu.Unlock()
	if server == nil {
		return
	}
	close(done)
	server.Stop()
}

// register calls the kubelet's Registration service for resource, naming this plugin's socket.
func register(kubeletSocket, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = api.NewRegistrationClient(conn).Register(ctx, &api.RegisterRequest{
		Version:      api.Version,
		Endpoint:     socketName,
		ResourceName: resource,
		Options:      &api.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	return err
}

func (p *plugin) GetDevicePluginOptions(context.Context, *api.Empty) (*api.DevicePluginOptions, error) {
	return &api.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the device list once (the stand-in devices never change health), then blocks.
func (p *plugin) ListAndWatch(_ *api.Empty, stream grpc.ServerStreamingServer[api.ListAndWatchResponse]) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if err := stream.Send(&api.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
	case <-done:
	}
	return nil
}

func (p *plugin) GetPreferredAllocation(_ context.Context, req *api.PreferredAllocationRequest) (*api.PreferredAllocationResponse, error) {
	resp := &api.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		ids := preferred(c.AvailableDeviceIDs, c.MustIncludeDeviceIDs, int(c.AllocationSize))
		resp.ContainerResponses = append(resp.ContainerResponses, &api.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate hands out environment variables only: no device nodes, no mounts (there is no GPU).
func (p *plugin) Allocate(_ context.Context, req *api.AllocateRequest) (*api.AllocateResponse, error) {
	resp := &api.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !p.known[id] {
				return nil, status.Errorf(codes.InvalidArgument, "unknown device %q", id)
			}
		}
		log.Printf("allocate %v", c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &api.ContainerAllocateResponse{
			Envs: map[string]string{
				"NVIDIA_VISIBLE_DEVICES": visibleDevices(c.DevicesIds),
				"AIINFRA_LAB_STANDIN":    "1",
			},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *api.PreStartContainerRequest) (*api.PreStartContainerResponse, error) {
	return &api.PreStartContainerResponse{}, nil
}
