// The aiinfra.k3s lab's main package for cert-manager's controller (NOT cert-manager's own cmd/controller).
//
// cert-manager's controller binary is built from its nested module github.com/cert-manager/cert-manager/cmd/controller
// (main.go and the app and options packages: flags, configuration file, wiring). The main module's zip leaves
// that nested module out and the Go module proxy does not serve it (404 for .../cmd/controller/@v/v1.21.2.info),
// so lab/nodebuild.py writes this file into a copy of the main module as cmd/aiinfra-lab-controller and builds it
// there. Everything that does the work is cert-manager's own code from the main module: the controller context
// (pkg/controller.NewContextFactory), its informers and clients, and the controllers, which register themselves
// when imported. This file only parses a few of the upstream flags (same names and defaults), runs leader election
// on the upstream lease (cert-manager-controller), and starts the imported controllers as upstream's app does.
//
// Imported, so running: the Certificate controllers (trigger, key manager, request manager, issuing, readiness,
// revision manager, metrics), the CertificateRequest approver and its CA and SelfSigned issuers, the Issuer and
// ClusterIssuer controllers with the CA and SelfSigned issuer types. Left out: ACME (orders, challenges, the DNS-01
// providers' cloud SDKs), Vault, Venafi, the CertificateSigningRequest signers, the ingress and Gateway shims,
// the metrics server, the configuration file. The chart's ACME flags (--acme-http01-solver-image,
// --max-concurrent-challenges) are accepted and unused, so its Deployment starts as rendered; /livez on
// --healthz-listen-address (default :9403) answers the chart's livenessProbe. cert-manager's webhook and cainjector
// run from the lab's mains beside this one (lab/certmanager/webhook, lab/certmanager/cainjector).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/metrics"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Version is set with -X by lab/nodebuild.py.
var Version = "unknown"

const leaseName = "cert-manager-controller" // upstream's lease, and the chart's leader-election Role's resourceName

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager controller (aiinfra.k3s lab main): %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	opts := controllerpkg.ContextOptions{}
	fs := flag.NewFlagSet("controller", flag.ExitOnError)
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&opts.APIServerHost, "master", "", "the API server's address, overriding the kubeconfig's")
	fs.StringVar(&opts.Namespace, "namespace", "", "watch only this namespace (all when empty)")
	fs.StringVar(&opts.ClusterResourceNamespace, "cluster-resource-namespace", "kube-system",
		"namespace of the Secrets ClusterIssuers refer to")
	fs.BoolVar(&opts.EnableOwnerRef, "enable-certificate-owner-ref", false,
		"make each Certificate the owner of its Secret")
	fs.BoolVar(&opts.ClusterIssuerAmbientCredentials, "cluster-issuer-ambient-credentials", true,
		"let ClusterIssuers use ambient credentials")
	fs.BoolVar(&opts.IssuerAmbientCredentials, "issuer-ambient-credentials", false,
		"let Issuers use ambient credentials")
	kubeQPS := fs.Float64("kube-api-qps", 20, "client-side QPS limit (when the API server has no APF)")
	fs.IntVar(&opts.KubernetesAPIBurst, "kube-api-burst", 50, "client-side burst limit")
	leaderElect := fs.Bool("leader-elect", true, "run leader election before starting the controllers")
	leNamespace := fs.String("leader-election-namespace", "kube-system", "namespace of the leader election lease")
	leLease := fs.Duration("leader-election-lease-duration", 60*time.Second, "leader election lease duration")
	leRenew := fs.Duration("leader-election-renew-deadline", 40*time.Second, "leader election renew deadline")
	leRetry := fs.Duration("leader-election-retry-period", 15*time.Second, "leader election retry period")
	showVersion := fs.Bool("version", false, "print the version and exit")
	// Flags the chart (deploy/charts/cert-manager) passes by default that this build has no use for: accepted so
	// that the chart's Deployment starts as rendered, and said in the log.
	acmeSolverImage := fs.String("acme-http01-solver-image", "", "accepted, unused: this build has no ACME")
	maxChallenges := fs.Int("max-concurrent-challenges", 60, "accepted, unused: this build has no ACME")
	healthz := fs.String("healthz-listen-address", ":9403", "address of the /livez endpoint the chart's livenessProbe calls")
	klog.InitFlags(fs) // --v and klog's other flags, as upstream's logging flags
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *showVersion {
		fmt.Printf("cert-manager controller %s (aiinfra.k3s lab main; CA and SelfSigned issuers only)\n", Version)
		return nil
	}
	opts.KubernetesAPIQPS = float32(*kubeQPS)
	if *healthz != "" && *healthz != "0" {
		mux := http.NewServeMux()
		mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Addr: *healthz, Handler: mux, ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = srv.ListenAndServe() }()
	}
	opts.CertificateRequestMinimumBackoffDuration = time.Hour // upstream's defaults
	opts.CertificateRequestMaximumBackoffDuration = 32 * time.Hour

	rootCtx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rootCtx = logf.NewContext(rootCtx, logf.Log, "controller")
	log := logf.FromContext(rootCtx)
	log.Info("starting cert-manager controller (aiinfra.k3s lab main)", "version", Version,
		"ignored-acme-http01-solver-image", *acmeSolverImage, "ignored-max-concurrent-challenges", *maxChallenges,
		"cluster-resource-namespace", opts.ClusterResourceNamespace)

	factory, err := controllerpkg.NewContextFactory(rootCtx, opts)
	if err != nil {
		return err
	}
	ctx, err := factory.Build()
	if err != nil {
		return err
	}
	start := func(leaderCtx context.Context) {
		if err := runControllers(leaderCtx, log, factory, ctx); err != nil {
			log.Error(err, "controllers stopped")
			os.Exit(1)
		}
	}
	if !*leaderElect {
		start(rootCtx)
		return nil
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(util.RestConfigWithUserAgent(ctx.RESTConfig, "leader-election"))
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, *leNamespace, leaseName, client.CoreV1(),
		client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id + "-external-cert-manager-controller",
			EventRecorder: ctx.Recorder})
	if err != nil {
		return err
	}
	leaderelection.RunOrDie(rootCtx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: *leLease, RenewDeadline: *leRenew, RetryPeriod: *leRetry,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: start,
			OnStoppedLeading: func() { log.Info("leader election lost or released") },
		},
	})
	return nil
}

func runControllers(ctx context.Context, log logr.Logger, factory *controllerpkg.ContextFactory,
	cctx *controllerpkg.Context) error {
	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		if cctx.Namespace != "" && name == clusterissuers.ControllerName {
			continue // as upstream: no ClusterIssuers when scoped to one namespace
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, name := range names {
		iface, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Info("starting controller", "controller", name)
			if err := iface.Run(5, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		}()
	}
	cctx.KubeSharedInformerFactory.Start(ctx.Done())
	cctx.SharedInformerFactory.Start(ctx.Done())
	cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	wg.Wait()
	close(errs)
	return <-errs
}
