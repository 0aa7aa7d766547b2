// The go-oidc v2 verifier the conformance tests run (verify.go). The versions are the ones
// Kubernetes v1.37.2 builds its kube-apiserver's JWT authenticator with.
module ichor.local/hack/conformance/go-oidc

go 1.26.0

require github.com/coreos/go-oidc v2.5.0+incompatible

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/pquerna/cachecontrol v0.1.0 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	gopkg.in/go-jose/go-jose.v2 v2.6.3 // indirect
)
