// Command aiinfra-lab-supervisor is the aiinfra.k3s lab's STAND-IN for K3s's supervisor, the part of the K3s
// server that listens on the API port: NOT K3s (none of its /cacerts, /v1-k3s/... or node-join endpoints). The
// lab's K3s stand-in (lab/node/k3s_standin.py) starts it; lab/nodebuild.py builds it.
//
// It listens where K3s's supervisor does (6443), serves GET/HEAD /static/... anonymously from the server's static
// directory (K3s: /var/lib/rancher/k3s/server/static, which holds charts/<file>.tgz for the
// https://%{KUBERNETES_API}%/static/charts/... HelmChart URLs), and reverse-proxies every other request to
// kube-apiserver on 127.0.0.1:6444, as K3s does.
//
// Authentication through the proxy: kube-apiserver's request-header (front-proxy) authenticator. The proxy
// presents its own client certificate, signed by the request-header CA and named in
// --requestheader-allowed-names; when the client presented a certificate that verifies against the cluster's
// client CA, the proxy sends X-Remote-User (CN) and X-Remote-Group (each O) for it. Bearer tokens, basic
// credentials and Impersonate-* headers pass through untouched for kube-apiserver to judge; a request with no
// credentials reaches kube-apiserver as anonymous, exactly as it would directly. X-Remote-* headers a client sends
// are always removed. A client certificate that does not verify is answered 401, as kube-apiserver does.
// Watches stream (responses are flushed at once) and protocol upgrades (exec, attach, port-forward over SPDY or
// WebSocket) are relayed by net/http/httputil's ReverseProxy.
//
// Every flag except -listen, -backend and -static-dir is required. Standard library only.
package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const (
	headerUser  = "X-Remote-User"
	headerGroup = "X-Remote-Group"
	extraPrefix = "X-Remote-Extra-"
)

// config is what the flags give.
type config struct {
	listen, backend, certFile, keyFile, clientCA, backendCA, proxyCert, proxyKey, staticDir string
}

// parseFlags reads the command line; an error names the missing or bad flags.
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("aiinfra-lab-supervisor", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", "0.0.0.0:6443", "address to listen on (K3s's supervisor port)")
	fs.StringVar(&c.backend, "backend", "https://127.0.0.1:6444", "kube-apiserver URL")
	fs.StringVar(&c.certFile, "tls-cert-file", "", "serving certificate (the API server's names and addresses)")
	fs.StringVar(&c.keyFile, "tls-private-key-file", "", "serving key")
	fs.StringVar(&c.clientCA, "client-ca-file", "", "CA that signs client certificates (kube-apiserver's --client-ca-file)")
	fs.StringVar(&c.backendCA, "backend-ca-file", "", "CA that signs kube-apiserver's serving certificate")
	fs.StringVar(&c.proxyCert, "proxy-client-cert-file", "", "client certificate towards kube-apiserver, signed by its --requestheader-client-ca-file")
	fs.StringVar(&c.proxyKey, "proxy-client-key-file", "", "key of -proxy-client-cert-file")
	fs.StringVar(&c.staticDir, "static-dir", "/var/lib/rancher/k3s/server/static", "directory served anonymously under /static/")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var missing []string
	for name, value := range map[string]string{
		"-tls-cert-file": c.certFile, "-tls-private-key-file": c.keyFile, "-client-ca-file": c.clientCA,
		"-backend-ca-file": c.backendCA, "-proxy-client-cert-file": c.proxyCert, "-proxy-client-key-file": c.proxyKey,
	} {
		if value == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return c, fmt.Errorf("missing required flags: %s", strings.Join(missing, " "))
	}
	if u, err := url.Parse(c.backend); err != nil || u.Scheme != "https" || u.Host == "" {
		return c, fmt.Errorf("-backend %q: want https://HOST:PORT", c.backend)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatalf("aiinfra-lab-supervisor: %v", err)
	}
	clientPool := mustPool(c.clientCA)
	backendPool := mustPool(c.backendCA)
	target, err := url.Parse(c.backend)
	if err != nil {
		log.Fatalf("backend: %v", err)
	}
	proxyPair, err := tls.LoadX509KeyPair(c.proxyCert, c.proxyKey)
	if err != nil {
		log.Fatalf("proxy client certificate: %v", err)
	}
	newTransport := func(certs []tls.Certificate) *http.Transport {
		return &http.Transport{
			Proxy:               nil, // never through an environment proxy
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     &tls.Config{RootCAs: backendPool, Certificates: certs, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true, // requests with Upgrade headers still go over HTTP/1.1 (net/http does that itself)
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}
	}
	// Two connection pools: with the request-header client certificate only for requests that carry an identity
	// taken from a verified client certificate; without any for the rest (tokens, anonymous), so kube-apiserver
	// judges those exactly as if they came to it directly (its x509 authenticator would otherwise reject the
	// proxy's certificate, which no cluster CA signs, and fail an anonymous request with 401).
	transport := &pickTransport{identity: newTransport([]tls.Certificate{proxyPair}), plain: newTransport(nil)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded() // kube-apiserver takes the client address for audit from X-Forwarded-For
			pr.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches and logs stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Printf("proxy %s %s: %v", r.Method, r.URL.Path, err)
			status(w, http.StatusBadGateway, "ServiceUnavailable", "the K3s stand-in's supervisor cannot reach kube-apiserver")
		},
	}
	h := &handler{proxy: rp, clientCAs: clientPool, static: c.staticDir}
	server := &http.Server{
		Addr:              c.listen,
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Ask for a client certificate but let handshakes without one through (tokens, anonymous /static/);
			// the certificate is verified per request below, as kube-apiserver's x509 authenticator does.
			ClientAuth: tls.RequestClientCert,
		},
		ErrorLog: log.New(os.Stderr, "supervisor http: ", log.LstdFlags),
	}
	log.Printf("aiinfra lab K3s stand-in supervisor (not K3s): %s -> %s, /static/ from %s", c.listen, c.backend, c.staticDir)
	if err := server.ListenAndServeTLS(c.certFile, c.keyFile); err != nil {
		log.Fatal(err)
	}
}

type pickTransport struct{ identity, plain http.RoundTripper }

func (t *pickTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get(headerUser) != "" {
		return t.identity.RoundTrip(r)
	}
	return t.plain.RoundTrip(r)
}

type handler struct {
	proxy     *httputil.ReverseProxy
	clientCAs *x509.CertPool
	static    string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/static" || strings.HasPrefix(r.URL.Path, "/static/") {
		h.serveStatic(w, r)
		return
	}
	// Never let a client speak for the proxy.
	for name := range r.Header {
		if strings.EqualFold(name, headerUser) || strings.EqualFold(name, headerGroup) ||
			strings.HasPrefix(strings.ToLower(name), strings.ToLower(extraPrefix)) {
			r.Header.Del(name)
		}
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		user, groups, err := h.verify(r.TLS.PeerCertificates)
		if err != nil {
			status(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
			log.Printf("%s %s from %s: client certificate rejected: %v", r.Method, r.URL.Path, r.RemoteAddr, err)
			return
		}
		r.Header.Set(headerUser, user)
		for _, g := range groups {
			r.Header.Add(headerGroup, g)
		}
		// kube-apiserver's x509 authenticator records which certificate authenticated (user.Info extra
		// authentication.kubernetes.io/credential-id); the same through the proxy (key escaped as the
		// request-header authenticator expects).
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		r.Header.Set(extraPrefix+url.PathEscape("authentication.kubernetes.io/credential-id"), "X509SHA256="+hex.EncodeToString(sum[:]))
	}
	h.proxy.ServeHTTP(w, r)
}

// verify checks the client's chain against the client CA for client auth; returns CN and O's (kube-apiserver's
// CommonNameUserConversion).
func (h *handler) verify(chain []*x509.Certificate) (string, []string, error) {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: h.clientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return "", nil, err
	}
	if chain[0].Subject.CommonName == "" {
		return "", nil, errors.New("no common name")
	}
	return chain[0].Subject.CommonName, chain[0].Subject.Organization, nil
}

// serveStatic: files only (no listings), GET and HEAD only, no credentials needed: what pods fetch charts with.
func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rel := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, "/static")), "/")
	full := filepath.Join(h.static, filepath.FromSlash(rel))
	info, err := os.Lstat(full) // a symlink is not served ...
	if rel == "" || err != nil || !info.Mode().IsRegular() || !h.inside(full, rel) {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(full)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	log.Printf("static %s %s (%d bytes) to %s", r.Method, r.URL.Path, info.Size(), r.RemoteAddr)
	http.ServeContent(w, r, info.Name(), info.ModTime(), f)
}

// inside: full (the static directory joined with rel) names the same file once every symlink is resolved, so no
// directory on the way is a symlink out of the static directory either.
func (h *handler) inside(full, rel string) bool {
	root, err := filepath.EvalSymlinks(h.static)
	if err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(full)
	return err == nil && real == filepath.Join(root, filepath.FromSlash(rel))
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
}

func mustPool(file string) *x509.CertPool {
	pem, err := os.ReadFile(file)
	if err != nil {
		log.Fatalf("%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		log.Fatalf("%s: no certificates", file)
	}
	return pool
}
