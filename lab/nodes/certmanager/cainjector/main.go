// The aiinfra.k3s lab's main package for cert-manager's cainjector (NOT cert-manager's own cmd/cainjector, a nested
// module the Go module proxy does not serve). Built inside a copy of github.com/cert-manager/cert-manager (as
// cmd/aiinfra-lab-cainjector). The injectors are cert-manager's (pkg/controller/cainjector.RegisterAllInjectors);
// this file parses the flags the chart passes (upstream names and defaults, from the v1alpha1 defaults), builds
// the controller-runtime manager with upstream's leader election lease (cert-manager-cainjector-leader-election)
// and runs it, as upstream's cmd/cainjector/app does. Left out: --config, pprof, TLS on the metrics endpoint.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	pubv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
)

var Version = "unknown"

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager cainjector (aiinfra.k3s lab main): %v\n", err)
		os.Exit(1)
	}
}

// defaults: upstream's configuration defaults (the v1alpha1 defaulting functions), converted to the internal type.
func defaults() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &pubv1alpha1.CAInjectorConfiguration{}
	scheme.Default(versioned)
	cfg := &config.CAInjectorConfiguration{}
	return cfg, scheme.Convert(versioned, cfg, nil)
}

func run() error {
	c, err := defaults()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("cainjector", pflag.ExitOnError)
	configFile := fs.String("config", "", "not supported by the lab's main")
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "watch only this namespace")
	fs.BoolVar(&c.LeaderElectionConfig.Enabled, "leader-elect", c.LeaderElectionConfig.Enabled, "leader election")
	fs.StringVar(&c.LeaderElectionConfig.Namespace, "leader-election-namespace", c.LeaderElectionConfig.Namespace, "lease namespace")
	fs.DurationVar(&c.LeaderElectionConfig.LeaseDuration, "leader-election-lease-duration", c.LeaderElectionConfig.LeaseDuration, "")
	fs.DurationVar(&c.LeaderElectionConfig.RenewDeadline, "leader-election-renew-deadline", c.LeaderElectionConfig.RenewDeadline, "")
	fs.DurationVar(&c.LeaderElectionConfig.RetryPeriod, "leader-election-retry-period", c.LeaderElectionConfig.RetryPeriod, "")
	fs.BoolVar(&c.EnableDataSourceConfig.Certificates, "enable-certificates-data-source", c.EnableDataSourceConfig.Certificates, "")
	fs.BoolVar(&c.EnableInjectableConfig.MutatingWebhookConfigurations, "enable-mutatingwebhookconfigurations-injectable", c.EnableInjectableConfig.MutatingWebhookConfigurations, "")
	fs.BoolVar(&c.EnableInjectableConfig.ValidatingWebhookConfigurations, "enable-validatingwebhookconfigurations-injectable", c.EnableInjectableConfig.ValidatingWebhookConfigurations, "")
	fs.BoolVar(&c.EnableInjectableConfig.CustomResourceDefinitions, "enable-customresourcedefinitions-injectable", c.EnableInjectableConfig.CustomResourceDefinitions, "")
	fs.BoolVar(&c.EnableInjectableConfig.APIServices, "enable-apiservices-injectable", c.EnableInjectableConfig.APIServices, "")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "")
	logf.AddFlags(&c.Logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *configFile != "" {
		return fmt.Errorf("--config is not supported by the lab's main")
	}
	if err := logf.ValidateAndApply(&c.Logging); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(c.FeatureGates); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager cainjector (aiinfra.k3s lab main)", "version", Version)

	ctrl.SetLogger(log) // controller-runtime's own messages, through cert-manager's logger
	// From --kubeconfig (in-cluster when empty): ctrl.GetConfigOrDie would ignore this flag set's --kubeconfig.
	kubeConfig, err := clientcmd.BuildConfigFromFlags("", c.KubeConfig)
	if err != nil {
		return err
	}
	restConfig := util.RestConfigWithUserAgent(kubeConfig, "cainjector")
	var namespaces map[string]cache.Config
	if c.Namespace != "" {
		namespaces = map[string]cache.Config{c.Namespace: {}}
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                c.LeaderElectionConfig.Enabled,
		LeaderElectionNamespace:       c.LeaderElectionConfig.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &c.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:                 &c.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:                   &c.LeaderElectionConfig.RetryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: c.MetricsListenAddress},
	})
	if err != nil {
		return fmt.Errorf("error creating manager: %w", err)
	}
	if c.EnableDataSourceConfig.Certificates { // as upstream: wait up to 5 minutes for the Certificate CRD
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return err
		}
	}
	opts := cainjector.SetupOptions{
		Namespace:                    c.Namespace,
		IgnoreNamespaces:             c.IgnoreNamespaces,
		EnableCertificatesDataSource: c.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   c.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: c.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     c.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       c.EnableInjectableConfig.CustomResourceDefinitions,
		},
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, opts); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
