// Command k8scheck validates Kubernetes manifests (a multi-document YAML
// stream on stdin, e.g. `kustomize build` output) strictly against the
// official Go API types: each document's apiVersion and kind must be one
// it knows, and it must decode into that type with no unknown field and no
// value of the wrong type (sigs.k8s.io/yaml UnmarshalStrict); ServiceMonitor
// is checked against the Prometheus Operator's own type, Certificate and
// Issuer against cert-manager's (the version pinned in tools/go.mod). `make k8s-check`
// runs it beside kubeconform (whose schemas tools/k8sschemas makes): this
// check follows the Go types the code is built with, kubeconform the API's
// OpenAPI schemas (required fields, CRD patterns).
//
// Usage: kustomize build deploy/k8s/overlays/example | go run ./k8scheck
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// kinds maps apiVersion/kind to a new value of its Go type.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/Namespace":                            func() any { return &corev1.Namespace{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"cert-manager.io/v1/Certificate":          func() any { return &certmanagerv1.Certificate{} },
	"cert-manager.io/v1/Issuer":               func() any { return &certmanagerv1.Issuer{} },
}

func main() {
	n, err := check(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8scheck:", err)
		os.Exit(1)
	}
	fmt.Printf("k8scheck: %d resources valid\n", n)
}

// check validates every document of r and returns how many it checked.
func check(r io.Reader) (int, error) {
	docs, err := split(r)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, doc := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			errs = append(errs, err)
			continue
		}
		id := head.APIVersion + "/" + head.Kind
		mk, ok := kinds[id]
		if !ok {
			errs = append(errs, fmt.Errorf("%s %q: a kind this check does not know", id, head.Metadata.Name))
			continue
		}
		if head.Metadata.Name == "" {
			errs = append(errs, fmt.Errorf("%s: no metadata.name", id))
		}
		if err := yaml.UnmarshalStrict(doc, mk()); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", id, head.Metadata.Name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// split cuts a YAML stream at `---` lines, dropping empty documents.
func split(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	flush := func() {
		if strings.TrimSpace(cur.String()) != "" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for sc.Scan() {
		if line := sc.Text(); strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	flush()
	return docs, sc.Err()
}
