package main

import (
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/resource"
	"github.com/yannh/kubeconform/pkg/validator"
)

// swagger is a small OpenAPI v2 spec shaped like Kubernetes': ObjectMeta,
// Quantity, IntOrString, a namespaced kind in a named group, a core kind, and
// a recursive definition (as JSONSchemaProps is).
const swagger = `{"definitions": {
  "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
    "name": {"type": "string"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
  "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
  "example.Widget": {
    "type": "object",
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "spec": {"$ref": "#/definitions/example.WidgetSpec"}},
    "x-kubernetes-group-version-kind": [{"group": "widgets.example.dev", "version": "v1", "kind": "Widget"}]},
  "example.WidgetSpec": {"type": "object", "required": ["size"], "properties": {
    "size": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
    "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
    "replicas": {"type": "integer", "format": "int32"},
    "tree": {"$ref": "#/definitions/example.Node"}}},
  "example.Node": {"type": "object", "properties": {"child": {"$ref": "#/definitions/example.Node"}}},
  "example.Thing": {
    "type": "object",
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "data": {"type": "object", "additionalProperties": {"type": "string"}}},
    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Thing"}]}
}}`

// crd is a CustomResourceDefinition shaped like controller-gen's output.
const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.gadgets.example.dev}
spec:
  group: gadgets.example.dev
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [selector]
            properties:
              selector: {type: string}
              port:
                anyOf: [{type: integer}, {type: string}]
                x-kubernetes-int-or-string: true
              interval: {type: string, pattern: '^[0-9]+(s|m)$'}
              note: {type: string, nullable: true}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
                properties: {a: {type: string}}
  - name: v1alpha1
    served: false
    schema:
      openAPIV3Schema: {type: object}
`

// TestSchemasAsKubeconformReadsThem writes the schemas made from swagger and
// crd and validates manifests with kubeconform's own validator, strict and
// reading the directory through the schema location `make k8s-check` uses.
func TestSchemasAsKubeconformReadsThem(t *testing.T) {
	defs, kinds, err := FromSwagger([]byte(swagger))
	if err != nil {
		t.Fatal(err)
	}
	crdFiles, err := FromCRD([]byte(crd))
	if err != nil {
		t.Fatal(err)
	}
	if len(crdFiles) != 1 || crdFiles[0].Name != "gadget-gadgets-v1.json" {
		t.Fatalf("CRD files %v, want only gadget-gadgets-v1.json (v1alpha1 is not served)", crdFiles)
	}
	dir := t.TempDir()
	if err := write(dir, append(append([]File{defs}, kinds...), crdFiles...)); err != nil {
		t.Fatal(err)
	}
	v, err := validator.New([]string{dir + "/{{.ResourceKind}}{{.KindSuffix}}.json"}, validator.Opts{Strict: true})
	if err != nil {
		t.Fatal(err)
	}

	const widget = "apiVersion: widgets.example.dev/v1\nkind: Widget\nmetadata:\n  name: w\n"
	const thing = "apiVersion: v1\nkind: Thing\nmetadata:\n  name: t\n"
	const gadget = "apiVersion: gadgets.example.dev/v1\nkind: Gadget\nmetadata:\n  name: g\n"
	tests := []struct {
		name    string
		doc     string
		invalid string // a part of the validation error; "" for valid
	}{
		{"widget", widget + "spec: {size: 500m, port: http, replicas: 2}", ""},
		{"quantity as a number", widget + "spec: {size: 2}", ""},
		{"int-or-string as an integer", widget + "spec: {size: 1, port: 8080}", ""},
		{"optional field null", widget + "spec: {size: 1, replicas: null}", ""},
		{"recursive definition", widget + "spec: {size: 1, tree: {child: {child: {}}}}", ""},
		{"unknown field", widget + "spec: {size: 1, sise: 2}", "additional properties 'sise' not allowed"},
		{"unknown field in a recursive definition", widget + "spec: {size: 1, tree: {child: {child: {leaf: 1}}}}", "additional properties 'leaf' not allowed"},
		{"unknown metadata field", widget + "  lables: {a: b}\nspec: {size: 1}", "additional properties 'lables' not allowed"},
		{"required field missing", widget + "spec: {port: 1}", "missing property 'size'"},
		{"required field null", widget + "spec: {size: null}", "'oneOf' failed"},
		{"quantity of the wrong type", widget + "spec: {size: true}", "'oneOf' failed"},
		{"int-or-string not an integer", widget + "spec: {size: 1, port: 1.5}", "'oneOf' failed"},
		{"wrong type", widget + "spec: {size: 1, replicas: two}", "want null or integer"},
		{"unknown top-level field", widget + "spec: {size: 1}\nstatus: {}", "additional properties 'status' not allowed"},
		{"core kind", thing + "data: {a: b}", ""},
		{"core kind, map value of the wrong type", thing + "data: {a: 1}", "want string"},
		{"custom resource", gadget + "spec: {selector: s, port: metrics, interval: 15s, note: null, extra: {a: x, b: 1}}", ""},
		{"custom resource int-or-string", gadget + "spec: {selector: s, port: 8080}", ""},
		{"custom resource unknown field", gadget + "spec: {selector: s, intervall: 15s}", "additional properties 'intervall' not allowed"},
		{"custom resource pattern", gadget + "spec: {selector: s, interval: 15 seconds}", "does not match pattern"},
		{"custom resource required", gadget + "spec: {port: 1}", "missing property 'selector'"},
		{"custom resource metadata is ObjectMeta", gadget + "  lables: {a: b}\nspec: {selector: s}", "additional properties 'lables' not allowed"},
		{"preserve-unknown-fields still types known fields", gadget + "spec: {selector: s, extra: {a: 1}}", "want null or string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := v.ValidateResource(resource.Resource{Path: tt.name, Bytes: []byte(tt.doc)})
			switch {
			case tt.invalid == "" && r.Status != validator.Valid:
				t.Fatalf("status %d, want valid: %v", r.Status, r.Err)
			case tt.invalid != "" && r.Status != validator.Invalid:
				t.Fatalf("status %d (%v), want invalid with %q", r.Status, r.Err, tt.invalid)
			case tt.invalid != "" && !strings.Contains(r.Err.Error(), tt.invalid):
				t.Fatalf("error %q, want it to contain %q", r.Err, tt.invalid)
			}
		})
	}
}

func TestFileNameIsKubeconformsSchemaPath(t *testing.T) {
	tests := []struct{ kind, apiVersion, want string }{
		{"Service", "v1", "service-v1.json"},
		{"Deployment", "apps/v1", "deployment-apps-v1.json"},
		{"PodDisruptionBudget", "policy/v1", "poddisruptionbudget-policy-v1.json"},
		{"FlowSchema", "flowcontrol.apiserver.k8s.io/v1", "flowschema-flowcontrol-v1.json"},
		{"ServiceMonitor", "monitoring.coreos.com/v1", "servicemonitor-monitoring-v1.json"},
	}
	for _, tt := range tests {
		if got := FileName(tt.kind, tt.apiVersion); got != tt.want {
			t.Errorf("FileName(%q, %q) = %q, want %q", tt.kind, tt.apiVersion, got, tt.want)
		}
	}
}

func TestFromSwaggerRejects(t *testing.T) {
	dup := strings.Replace(swagger, `"group": "", "version": "v1", "kind": "Thing"`,
		`"group": "widgets.example.dev", "version": "v1", "kind": "Widget"`, 1)
	tests := []struct{ name, spec, want string }{
		{"two definitions, one kind", dup, "both map to widget-widgets-v1.json"},
		{"not the Kubernetes spec", `{"definitions": {"a": {"type": "object"}}}`, "not the Kubernetes spec"},
		{"not JSON", `definitions:`, "swagger:"},
	}
	for _, tt := range tests {
		_, _, err := FromSwagger([]byte(tt.spec))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestFromCRDRejects(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not a CRD", "apiVersion: v1\nkind: ConfigMap\n", "not a CustomResourceDefinition"},
		{"no served version", strings.ReplaceAll(crd, "served: true", "served: false"), "no served version"},
	}
	for _, tt := range tests {
		_, err := FromCRD([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}
