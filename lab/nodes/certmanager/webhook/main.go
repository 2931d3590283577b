// The aiinfra.k3s lab's main package for cert-manager's webhook (NOT cert-manager's own cmd/webhook, a nested module
// the Go module proxy does not serve). Built inside a copy of github.com/cert-manager/cert-manager (as
// cmd/aiinfra-lab-webhook) so that its internal packages are importable. Everything that does the work is
// cert-manager's: the flags and defaults (pkg/webhook/options: the same names the chart passes), the server with
// its admission chain, validation, defaulting, conversion, dynamic serving CA and health endpoints
// (internal/webhook.NewCertManagerWebhookServer). Not supported: --config (the chart passes it only when
// webhook.config is set).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

var Version = "unknown"

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager webhook (aiinfra.k3s lab main): %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("webhook", pflag.ExitOnError)
	flags := options.NewWebhookFlags()
	flags.AddFlags(fs)
	options.AddConfigFlags(fs, cfg)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if flags.Config != "" {
		return fmt.Errorf("--config is not supported by the lab's main")
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	log := logf.Log.WithName("webhook")
	crlog.SetLogger(log) // controller-runtime's admission code logs through it (else it warns once, with a stack)
	log.Info("starting cert-manager webhook (aiinfra.k3s lab main)", "version", Version)
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
