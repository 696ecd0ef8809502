// Command k8sschemas writes the JSON schemas kubeconform validates
// Kubernetes manifests against, made here from sources the Go module proxy
// serves instead of downloaded from kubeconform's schema repository (which
// this project's machines cannot reach, and whose files we do not commit):
//
//   - every built-in kind from the OpenAPI spec in k8s.io/kubernetes
//     (api/openapi-spec/swagger.json), the version matching k8s.io/api in
//     tools/go.mod;
//   - ServiceMonitor from the Prometheus Operator's CustomResourceDefinition
//     in github.com/prometheus-operator/prometheus-operator (example/
//     prometheus-operator-crd);
//   - Certificate and Issuer from cert-manager's CustomResourceDefinitions in
//     github.com/cert-manager/cert-manager (deploy/crds), the version
//     tools/go.mod requires (k8scheck decodes into the same module's Go
//     types), read with `go list -m`.
//
// The modules are fetched with `go mod download`, so they are verified
// against the checksum database and cached in the module cache (the first
// run downloads about 25 MB, later runs read the cache).
//
// The output is openapi2jsonschema's strict layout: one file per kind named
// `{kind}-{group}-{version}.json` (lowercase, the group's first label, none
// for the core group) beside `_definitions.json`, so that
//
//	kubeconform -strict -schema-location '<dir>/{{.ResourceKind}}{{.KindSuffix}}.json'
//
// finds them. See [Strict] for what makes them strict.
//
// Usage: go run ./k8sschemas -out <dir>
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The modules the schemas are made from. kubernetesVersion follows k8s.io/api
// (v0.37.x is Kubernetes v1.37.x). The whole prometheus-operator repository
// module is served at v0.85.0 (the types module in go.mod is newer); the
// ServiceMonitor fields the manifests use are in both.
const (
	kubernetesModule  = "k8s.io/kubernetes"
	kubernetesVersion = "v1.37.2"
	swaggerPath       = "api/openapi-spec/swagger.json"

	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.85.0"
	serviceMonitorCRD   = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"

	certManagerModule = "github.com/cert-manager/cert-manager"
)

// certManagerCRDs are the cert-manager kinds the manifests use.
var certManagerCRDs = []string{
	"deploy/crds/cert-manager.io_certificates.yaml",
	"deploy/crds/cert-manager.io_issuers.yaml",
}

func main() {
	out := flag.String("out", "", "directory to write the schemas into (created if missing)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: k8sschemas -out <dir>")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, *out); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschemas:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	k8s, err := download(ctx, kubernetesModule, kubernetesVersion)
	if err != nil {
		return err
	}
	swagger, err := os.ReadFile(filepath.Join(k8s, swaggerPath))
	if err != nil {
		return err
	}
	defs, files, err := FromSwagger(swagger)
	if err != nil {
		return err
	}
	promOp, err := download(ctx, promOperatorModule, promOperatorVersion)
	if err != nil {
		return err
	}
	smFiles, err := readCRDs(promOp, serviceMonitorCRD)
	if err != nil {
		return err
	}
	cmVersion, err := required(ctx, certManagerModule)
	if err != nil {
		return err
	}
	cm, err := download(ctx, certManagerModule, cmVersion)
	if err != nil {
		return err
	}
	cmFiles, err := readCRDs(cm, certManagerCRDs...)
	if err != nil {
		return err
	}
	if err := write(out, append(append(append([]File{defs}, files...), smFiles...), cmFiles...)); err != nil {
		return err
	}
	fmt.Printf("k8sschemas: %d schemas from %s@%s, %d from %s@%s (%s), %d from %s@%s (%s)\n",
		len(files), kubernetesModule, kubernetesVersion,
		len(smFiles), promOperatorModule, promOperatorVersion, filepath.Base(serviceMonitorCRD),
		len(cmFiles), certManagerModule, cmVersion, strings.Join(baseNames(certManagerCRDs), ", "))
	return nil
}

// readCRDs converts the CRDs at paths (relative to dir) with [FromCRD].
func readCRDs(dir string, paths ...string) ([]File, error) {
	var files []File
	for _, p := range paths {
		crd, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return nil, err
		}
		f, err := FromCRD(crd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, f...)
	}
	return files, nil
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

// required returns the version of path that the tools module (the working
// directory: `go -C tools run ./k8sschemas`) requires in its go.mod.
func required(ctx context.Context, path string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", path)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go list -m %s (run from tools/): %w: %s", path, err, bytes.TrimSpace(stderr.Bytes()))
	}
	v := strings.TrimSpace(stdout.String())
	if v == "" {
		return "", fmt.Errorf("go list -m %s: no version: not required by tools/go.mod", path)
	}
	return v, nil
}

// write writes files into dir, creating it if missing.
func write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := json.Marshal(f.Schema)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// download runs `go mod download -json path@version` outside any module (so
// no go.mod or go.sum changes) and returns the module's directory in the
// module cache.
func download(ctx context.Context, path, version string) (string, error) {
	tmp, err := os.MkdirTemp("", "k8sschemas-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var m struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil && runErr == nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	if m.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", path, version, m.Error)
	}
	if runErr != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", path, version, runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if m.Dir == "" {
		return "", errors.New("go mod download " + path + "@" + version + ": no directory")
	}
	return m.Dir, nil
}
