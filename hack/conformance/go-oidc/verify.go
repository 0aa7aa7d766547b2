// Command go-oidc-verify verifies an ID token with go-oidc v2, the library inside the
// kube-apiserver's JWT authenticator, exactly as the authenticator uses it: discovery through
// NewProvider (optionally fetched from a different discovery URL, as `discoveryURL` does), the
// JWKS from the document's jwks_uri, and Verify with the audience as ClientID.
//
// Usage: go-oidc-verify -issuer URL -ca FILE -aud AUDIENCE [-discovery URL] [-token TOKEN | stdin]
// Prints the verified claims as JSON on stdout; exits 1 with go-oidc's error on stderr.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	oidc "github.com/coreos/go-oidc"
)

// rewrite sends the discovery request to another URL, as the kube-apiserver's transport does
// when `discoveryURL` is set; every other request (the JWKS) goes where the document says.
type rewrite struct {
	from, to string
	next     http.RoundTripper
}

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.to != "" && req.URL.String() == r.from {
		u, err := req.URL.Parse(r.to)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.URL = u
		req.Host = u.Host
	}
	return r.next.RoundTrip(req)
}

func main() {
	issuer := flag.String("issuer", "", "issuer URL (the token's iss)")
	caFile := flag.String("ca", "", "PEM CA bundle to trust")
	aud := flag.String("aud", "", "expected audience (ClientID)")
	discovery := flag.String("discovery", "", "fetch the discovery document from this URL instead")
	token := flag.String("token", "", "the ID token (default: read stdin)")
	flag.Parse()

	pool := x509.NewCertPool()
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail(err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			fail(fmt.Errorf("no certificate in %s", *caFile))
		}
	}
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: rewrite{from: strings.TrimSuffix(*issuer, "/") + "/.well-known/openid-configuration", to: *discovery, next: base},
	}
	ctx := oidc.ClientContext(context.Background(), client)
	provider, err := oidc.NewProvider(ctx, *issuer)
	if err != nil {
		fail(err)
	}
	raw := *token
	if raw == "" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		raw = strings.TrimSpace(string(b))
	}
	idToken, err := provider.Verifier(&oidc.Config{ClientID: *aud}).Verify(ctx, raw)
	if err != nil {
		fail(err)
	}
	var claims map[string]interface{}
	if err := idToken.Claims(&claims); err != nil {
		fail(err)
	}
	out, err := json.Marshal(claims)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
