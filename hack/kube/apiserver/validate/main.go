// Command authn-validate is the kube-apiserver's own decoding and validation of an
// AuthenticationConfiguration, over a stream of cases, for the differential test of
// `ichor authn validate` (golden/tests/it/apiserver_validator/).
//
// Input: one JSON object per line on stdin,
//
//	{"id": "...", "disallowedIssuers": ["https://..."], "config": "<the file's text>"}
//
// Output: one JSON object per input line on stdout, in the same order,
//
//	{"id": "...", "decodeError": "..." | null, "errors": [{"path", "type", "message"}]}
//
// Decoding is the kube-apiserver's (k8s.io/kubernetes pkg/kubeapiserver/options/authentication.go,
// loadAuthenticationConfigFromData): an empty file is refused, then a strict universal decoder of
// a scheme holding the apiserver.config.k8s.io group (v1alpha1, v1beta1, v1, converted to the
// internal type) must yield an AuthenticationConfiguration. Validation is
// ValidateAuthenticationConfiguration with the default CEL compiler and the given disallowed
// issuers (the service-account issuers in the real server), under the default feature gates.
// Each error's message is err.Error(), exactly as the kube-apiserver prints it.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/install"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
)

type request struct {
	ID                string   `json:"id"`
	DisallowedIssuers []string `json:"disallowedIssuers"`
	Config            string   `json:"config"`
}

type fieldError struct {
	Path    string `json:"path"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

type response struct {
	ID          string       `json:"id"`
	DecodeError *string      `json:"decodeError"`
	Errors      []fieldError `json:"errors"`
}

var (
	cfgScheme = runtime.NewScheme()
	codecs    = serializer.NewCodecFactory(cfgScheme, serializer.EnableStrict)
)

func init() {
	install.Install(cfgScheme)
}

// decode is loadAuthenticationConfigFromData of the kube-apiserver.
func decode(data []byte) (*apiserver.AuthenticationConfiguration, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty config data")
	}
	decodedObj, err := runtime.Decode(codecs.UniversalDecoder(), data)
	if err != nil {
		return nil, err
	}
	configuration, ok := decodedObj.(*apiserver.AuthenticationConfiguration)
	if !ok {
		return nil, fmt.Errorf("expected AuthenticationConfiguration, got %T", decodedObj)
	}
	if configuration == nil {
		return nil, fmt.Errorf("expected non-nil AuthenticationConfiguration")
	}
	return configuration, nil
}

func answer(compiler authenticationcel.Compiler, req request) response {
	resp := response{ID: req.ID, Errors: []fieldError{}}
	cfg, err := decode([]byte(req.Config))
	if err != nil {
		text := err.Error()
		resp.DecodeError = &text
		return resp
	}
	for _, e := range validation.ValidateAuthenticationConfiguration(compiler, cfg, req.DisallowedIssuers) {
		resp.Errors = append(resp.Errors, fieldError{Path: e.Field, Type: string(e.Type), Message: e.Error()})
	}
	return resp
}

func run(in io.Reader, out io.Writer) error {
	compiler := authenticationcel.NewDefaultCompiler()
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriter(out)
	defer writer.Flush()
	encoder := json.NewEncoder(writer)
	encoder.SetEscapeHTML(false)
	for {
		line, err := reader.ReadBytes('\n')
		if len(line) > 0 {
			var req request
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				return fmt.Errorf("reading a case: %w", jerr)
			}
			if eerr := encoder.Encode(answer(compiler, req)); eerr != nil {
				return eerr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "authn-validate:", err)
		os.Exit(1)
	}
}
