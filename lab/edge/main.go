// Command edge routes HTTP requests the way K3s's bundled Traefik routes an IngressRoute: Traefik's own
// request decorator and rule muxer (github.com/traefik/traefik/v3, the version K3s bundles) decide which
// route a request matches; a matched route runs its rendered Middlewares in order, headers and rateLimit through
// Traefik's own middlewares (pkg/middlewares/headers, pkg/middlewares/ratelimiter, sourceCriterion and redis included),
// stripPrefix with Traefik's semantics written out here (that middleware's package pulls in a module the Go proxy
// does not serve), and forwards to its backend. Unmatched requests get Traefik's 404. TLS and the redirect are not part
// of it. Traefik's nested module github.com/traefik/traefik/dynamic/ext is not served either: ./ext stands in
// for it (upstream it holds three empty extension structs).
//
// A rateLimit is read as the Middleware CRD writes it (traefik.io/v1alpha1 RateLimit) and turned into Traefik's
// dynamic configuration the way Traefik's Kubernetes CRD provider does (createRateLimitMiddleware): defaults,
// periods and timeouts as int-or-string, and a redis block's `secret` resolved from CONFIG's secrets, which stand
// for the Secrets of the Middleware's namespace (Traefik requires both keys, username and password). With redis
// the limiter counts in that Redis (Traefik's token-bucket script), so edges sharing one Redis share one budget
// per source. TLS to Redis from Secrets (caSecret, certSecret) is not part of it.
//
//	edge CONFIG.json
//
// CONFIG: {"listen": "127.0.0.1:PORT", "routes": [{"name", "rule", "backend": URL, "middlewares": [the rendered
// Middlewares' specs, in the route's order]}], "secrets": {NAME: {KEY: VALUE}}}
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"

	ptypes "github.com/traefik/paerser/types"
	"github.com/traefik/traefik/v3/pkg/config/dynamic"
	"github.com/traefik/traefik/v3/pkg/middlewares/headers"
	"github.com/traefik/traefik/v3/pkg/middlewares/ratelimiter"
	"github.com/traefik/traefik/v3/pkg/middlewares/requestdecorator"
	traefikhttp "github.com/traefik/traefik/v3/pkg/muxer/http"
	traefikv1alpha1 "github.com/traefik/traefik/v3/pkg/provider/kubernetes/crd/traefikio/v1alpha1"
	"github.com/traefik/traefik/v3/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// middleware is the spec of one rendered Middleware: exactly one of its fields is set.
type middleware struct {
	Headers     *dynamic.Headers           `json:"headers,omitempty"`
	RateLimit   *traefikv1alpha1.RateLimit `json:"rateLimit,omitempty"`
	StripPrefix *dynamic.StripPrefix       `json:"stripPrefix,omitempty"`
}

type route struct {
	Name    string `json:"name"`
	Rule    string `json:"rule"`
	Backend string `json:"backend"`
	// The route's Middlewares, in the IngressRoute's order.
	Middlewares []middleware `json:"middlewares"`
}

// chain wraps next in the route's Middlewares, the first one outermost as in Traefik: headers and rateLimit are
// Traefik's own middlewares, stripPrefix its semantics written out (see the package comment).
func chain(r route, secrets map[string]map[string]string, next http.Handler) (http.Handler, error) {
	handler := next
	for i := len(r.Middlewares) - 1; i >= 0; i-- {
		m := r.Middlewares[i]
		name := fmt.Sprintf("%s-%d", r.Name, i)
		var err error
		switch {
		case m.Headers != nil:
			handler, err = headers.New(context.Background(), handler, *m.Headers, name)
		case m.RateLimit != nil:
			var rl *dynamic.RateLimit
			if rl, err = rateLimit(m.RateLimit, secrets); err == nil {
				handler, err = ratelimiter.New(context.Background(), handler, *rl, name)
			}
		case m.StripPrefix != nil:
			handler = stripPrefix(m.StripPrefix.Prefixes, handler)
		default:
			err = fmt.Errorf("middleware %d: none of headers, rateLimit, stripPrefix", i)
		}
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
	}
	return handler, nil
}

type config struct {
	Listen string  `json:"listen"`
	Routes []route `json:"routes"`
	// The Secrets of the Middlewares' namespace: name to data (keys to values).
	Secrets map[string]map[string]string `json:"secrets"`
}

// rateLimit turns the CRD's RateLimit into Traefik's dynamic one as Traefik v3.7's CRD provider does
// (pkg/provider/kubernetes/crd/kubernetes.go: createRateLimitMiddleware, loadRedisCredentials), the Secrets
// taken from CONFIG instead of the API server.
func rateLimit(crd *traefikv1alpha1.RateLimit, secrets map[string]map[string]string) (*dynamic.RateLimit, error) {
	rl := &dynamic.RateLimit{}
	rl.SetDefaults()
	if crd.Average != nil {
		rl.Average = *crd.Average
	}
	if crd.Burst != nil {
		rl.Burst = *crd.Burst
	}
	if crd.Period != nil {
		if err := rl.Period.Set(crd.Period.String()); err != nil {
			return nil, err
		}
	}
	if crd.SourceCriterion != nil {
		rl.SourceCriterion = crd.SourceCriterion
	}
	if crd.Redis == nil {
		return rl, nil
	}
	r := crd.Redis
	rl.Redis = &dynamic.Redis{DB: r.DB, PoolSize: r.PoolSize, MinIdleConns: r.MinIdleConns, MaxActiveConns: r.MaxActiveConns}
	rl.Redis.SetDefaults()
	if len(r.Endpoints) > 0 {
		rl.Redis.Endpoints = r.Endpoints
	}
	if r.TLS != nil {
		if r.TLS.CASecret != "" || r.TLS.CertSecret != "" {
			return nil, fmt.Errorf("redis tls: caSecret and certSecret are not part of the lab edge")
		}
		rl.Redis.TLS = &types.ClientTLS{InsecureSkipVerify: r.TLS.InsecureSkipVerify}
	}
	for _, t := range []struct {
		from *intstr.IntOrString
		to   *ptypes.Duration
	}{{r.DialTimeout, rl.Redis.DialTimeout}, {r.ReadTimeout, rl.Redis.ReadTimeout}, {r.WriteTimeout, rl.Redis.WriteTimeout}} {
		if t.from != nil {
			if err := t.to.Set(t.from.String()); err != nil {
				return nil, err
			}
		}
	}
	if r.Secret != "" {
		data, ok := secrets[r.Secret]
		if !ok {
			return nil, fmt.Errorf("secret '%s' not found", r.Secret)
		}
		username, hasUsername := data["username"]
		password, hasPassword := data["password"]
		if !hasUsername || !hasPassword {
			return nil, fmt.Errorf("secret '%s' must contain both username and password keys", r.Secret)
		}
		rl.Redis.Username, rl.Redis.Password = username, password
	}
	return rl, nil
}

// stripPrefix removes the first matching prefix as Traefik's stripPrefix middleware does (leading slash kept,
// X-Forwarded-Prefix set).
func stripPrefix(prefixes []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		for _, prefix := range prefixes {
			if strings.HasPrefix(req.URL.Path, prefix) {
				req.URL.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, prefix), "/")
				if req.URL.RawPath != "" {
					req.URL.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(req.URL.RawPath, prefix), "/")
				}
				req.Header.Add("X-Forwarded-Prefix", prefix)
				req.RequestURI = req.URL.RequestURI()
				break
			}
		}
		next.ServeHTTP(rw, req)
	})
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	parser, err := traefikhttp.NewSyntaxParser()
	if err != nil {
		return err
	}
	mux := traefikhttp.NewMuxer(parser, nil)
	for _, r := range cfg.Routes {
		backend, err := url.Parse(r.Backend)
		if err != nil {
			return fmt.Errorf("route %s: backend: %w", r.Name, err)
		}
		name := r.Name
		proxy := httputil.NewSingleHostReverseProxy(backend)
		handler, err := chain(r, cfg.Secrets, http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			rw.Header().Set("X-Edge-Route", name)
			proxy.ServeHTTP(rw, req)
		}))
		if err != nil {
			return err
		}
		if err := mux.AddRoute(r.Rule, "", traefikhttp.GetRulePriority(r.Rule), "kubernetescrd", handler); err != nil {
			return fmt.Errorf("route %s: rule %q: %w", r.Name, r.Rule, err)
		}
	}
	decorator := requestdecorator.New(nil)
	server := &http.Server{
		Addr: cfg.Listen,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			decorator.ServeHTTP(rw, req, mux.ServeHTTP)
		}),
	}
	fmt.Printf("edge: %d route(s) on %s\n", len(cfg.Routes), cfg.Listen)
	return server.ListenAndServe()
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: edge CONFIG.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}
