package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func cert(t *testing.T, cn string, orgs []string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func setup(t *testing.T) (*handler, *x509.Certificate, *ecdsa.PrivateKey, *http.Header) {
	ca, caKey := cert(t, "ca", nil, nil, nil, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	seen := &http.Header{}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { *seen = r.Header.Clone() }))
	t.Cleanup(backend.Close)
	u, _ := url.Parse(backend.URL)
	dir, outside := t.TempDir(), t.TempDir()
	for _, err := range []error{
		os.MkdirAll(filepath.Join(dir, "charts", "sub"), 0o755),
		os.WriteFile(filepath.Join(dir, "charts", "a.tgz"), []byte("chart"), 0o600),
		os.WriteFile(filepath.Join(outside, "secret.tgz"), []byte("x"), 0o600),
		os.Symlink(filepath.Join(outside, "secret.tgz"), filepath.Join(dir, "charts", "link.tgz")),
		os.Symlink(outside, filepath.Join(dir, "linkdir")), // a directory on the way that leaves the root
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &handler{proxy: httputil.NewSingleHostReverseProxy(u), clientCAs: pool, static: dir}, ca, caKey, seen
}

func TestStatic(t *testing.T) {
	h, _, _, _ := setup(t)
	for path, want := range map[string]int{
		"/static/charts/a.tgz": 200, "/static/charts/": 404, "/static/": 404, "/static": 404,
		"/static/charts/sub": 404, "/static/charts/link.tgz": 404, "/static/charts/none.tgz": 404,
		"/static/../charts/a.tgz":    200, // cleaned inside the static root
		"/static/linkdir/secret.tgz": 404, "/static/charts/../../etc/passwd": 404,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/static/charts/a.tgz", nil))
	if rec.Code != 405 {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestIdentity(t *testing.T) {
	h, ca, caKey, seen := setup(t)
	// anonymous with forged headers: stripped
	r := httptest.NewRequest("GET", "/api", nil)
	r.Header.Set("X-Remote-User", "admin")
	r.Header.Add("x-remote-group", "system:masters")
	r.Header.Set("X-Remote-Extra-Scopes", "x")
	r.Header.Set("Authorization", "Bearer tok")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen.Get("X-Remote-User") != "" || seen.Get("X-Remote-Group") != "" || seen.Get("X-Remote-Extra-Scopes") != "" {
		t.Errorf("forged identity passed: %v", *seen)
	}
	if seen.Get("Authorization") != "Bearer tok" {
		t.Errorf("bearer token not passed through")
	}
	// verified client certificate: identity from it
	c, _ := cert(t, "system:node:n1", []string{"system:nodes", "x"}, ca, caKey, false)
	r = httptest.NewRequest("GET", "/api", nil)
	r.Header.Set("X-Remote-User", "admin")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen.Get("X-Remote-User") != "system:node:n1" || len(seen.Values("X-Remote-Group")) != 2 ||
		seen.Get("X-Remote-Extra-Authentication.kubernetes.io%2Fcredential-id") == "" {
		t.Errorf("identity: %v", *seen)
	}
	// a certificate from another CA: 401
	other, otherKey := cert(t, "other", nil, nil, nil, true)
	bad, _ := cert(t, "admin", []string{"system:masters"}, other, otherKey, false)
	r = httptest.NewRequest("GET", "/api", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bad}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 401 {
		t.Errorf("untrusted certificate: %d", rec.Code)
	}
}

func TestFlags(t *testing.T) {
	required := []string{"-tls-cert-file=s.crt", "-tls-private-key-file=s.key", "-client-ca-file=ca.crt",
		"-backend-ca-file=server-ca.crt", "-proxy-client-cert-file=p.crt", "-proxy-client-key-file=p.key"}
	c, err := parseFlags(required)
	if err != nil {
		t.Fatal(err)
	}
	if c.listen != "0.0.0.0:6443" || c.backend != "https://127.0.0.1:6444" || c.staticDir != "/var/lib/rancher/k3s/server/static" {
		t.Errorf("defaults: %+v", c)
	}
	if _, err := parseFlags(required[1:]); err == nil || !strings.Contains(err.Error(), "-tls-cert-file") {
		t.Errorf("missing -tls-cert-file: %v", err)
	}
	if _, err := parseFlags(append([]string{"-backend=http://127.0.0.1:6444"}, required...)); err == nil {
		t.Error("plain http backend accepted")
	}
}

type recordTransport struct{ n int }

func (r *recordTransport) RoundTrip(*http.Request) (*http.Response, error) {
	r.n++
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestPickTransport(t *testing.T) {
	identity, plain := &recordTransport{}, &recordTransport{}
	p := &pickTransport{identity: identity, plain: plain}
	r := httptest.NewRequest("GET", "https://127.0.0.1:6444/api", nil)
	if _, err := p.RoundTrip(r); err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Remote-User", "admin")
	if _, err := p.RoundTrip(r); err != nil {
		t.Fatal(err)
	}
	if identity.n != 1 || plain.n != 1 {
		t.Errorf("identity %d, plain %d: want 1 and 1", identity.n, plain.n)
	}
}
