package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefinitionsFile holds every definition of the Kubernetes OpenAPI spec;
// the per-kind files refer into it (`_definitions.json#/definitions/…`),
// as openapi2jsonschema's non-standalone layout does.
const DefinitionsFile = "_definitions.json"

const (
	defPrefix     = "#/definitions/"
	objectMetaDef = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	quantityDef   = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

// File is one schema file to write into the schema directory.
type File struct {
	Name   string         // e.g. deployment-apps-v1.json
	Schema map[string]any // the JSON schema (draft 4, kubeconform's default)
}

// FileName is the name kubeconform looks for with the schema location
// `<dir>/{{.ResourceKind}}{{.KindSuffix}}.json`: the kind lowercased, then
// the first label of the group (none for the core group), then the version
// (kubeconform's registry.schemaPath).
func FileName(kind, apiVersion string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return strings.ToLower(kind + "-" + apiVersion + ".json")
	}
	label, _, _ := strings.Cut(group, ".")
	return strings.ToLower(kind + "-" + label + "-" + version + ".json")
}

// FromSwagger converts the Kubernetes OpenAPI v2 spec (api/openapi-spec/
// swagger.json of k8s.io/kubernetes) into kubeconform's strict schemas: the
// shared [DefinitionsFile] and one file per group/version/kind. It returns
// an error if two definitions claim the same file.
func FromSwagger(data []byte) (defs File, kinds []File, err error) {
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return File{}, nil, fmt.Errorf("swagger: %w", err)
	}
	if spec.Definitions[objectMetaDef] == nil || spec.Definitions[quantityDef] == nil {
		return File{}, nil, errors.New("swagger: no ObjectMeta or Quantity definition; not the Kubernetes spec")
	}
	local := func(ref string) string { return ref }
	shared := func(ref string) string {
		if name, ok := strings.CutPrefix(ref, defPrefix); ok {
			return DefinitionsFile + defPrefix + name
		}
		return ref
	}
	all := make(map[string]any, len(spec.Definitions))
	owner := map[string]string{}
	names := make([]string, 0, len(spec.Definitions))
	for name := range spec.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := spec.Definitions[name]
		if name == quantityDef {
			// A quantity is written as a string ("500m") or a number (2).
			q := map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			if d, ok := def["description"]; ok {
				q["description"] = d
			}
			def = q
		}
		all[name] = Strict(def, local)
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			if kind == "" || version == "" {
				return File{}, nil, fmt.Errorf("swagger: %s: incomplete x-kubernetes-group-version-kind", name)
			}
			apiVersion := version
			if group != "" {
				apiVersion = group + "/" + version
			}
			file := FileName(kind, apiVersion)
			if prev, dup := owner[file]; dup {
				return File{}, nil, fmt.Errorf("swagger: %s and %s both map to %s", prev, name, file)
			}
			owner[file] = name
			kinds = append(kinds, File{Name: file, Schema: topLevel(Strict(def, shared), apiVersion, kind)})
		}
	}
	return File{Name: DefinitionsFile, Schema: map[string]any{"definitions": all}}, kinds, nil
}

// FromCRD converts each served version of a CustomResourceDefinition (YAML)
// into a strict schema file. metadata, which a CRD's schema leaves open, is
// checked against the Kubernetes ObjectMeta in [DefinitionsFile].
func FromCRD(data []byte) ([]File, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("crd: %w", err)
	}
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &crd); err != nil {
		return nil, fmt.Errorf("crd: %w", err)
	}
	if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group == "" || crd.Spec.Names.Kind == "" {
		return nil, fmt.Errorf("crd: kind %q, group %q, names.kind %q: not a CustomResourceDefinition", crd.Kind, crd.Spec.Group, crd.Spec.Names.Kind)
	}
	var files []File
	for _, v := range crd.Spec.Versions {
		s := v.Schema.OpenAPIV3Schema
		if !v.Served || s == nil {
			continue
		}
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return nil, fmt.Errorf("crd: %s %s: schema has no properties", crd.Spec.Names.Kind, v.Name)
		}
		props["metadata"] = map[string]any{"$ref": defPrefix + objectMetaDef}
		apiVersion := crd.Spec.Group + "/" + v.Name
		shared := func(ref string) string {
			if name, ok := strings.CutPrefix(ref, defPrefix); ok {
				return DefinitionsFile + defPrefix + name
			}
			return ref
		}
		files = append(files, File{
			Name:   FileName(crd.Spec.Names.Kind, apiVersion),
			Schema: topLevel(Strict(s, shared), apiVersion, crd.Spec.Names.Kind),
		})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("crd: %s: no served version with a schema", crd.Spec.Names.Kind)
	}
	return files, nil
}

// topLevel pins a kind's schema to its apiVersion and kind.
func topLevel(s map[string]any, apiVersion, kind string) map[string]any {
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
	return s
}

// Strict returns a copy of an OpenAPI schema (v2 definition or a CRD's v3
// schema) as the strict JSON schema (draft 4) kubeconform validates with,
// the rules of openapi2jsonschema's strict output:
//   - an object with properties admits no other property
//     (additionalProperties: false), unless it sets additionalProperties
//     or x-kubernetes-preserve-unknown-fields;
//   - an int-or-string (format int-or-string, x-kubernetes-int-or-string)
//     is a string or an integer;
//   - a property not listed in required, or marked nullable, may be null,
//     as the API server accepts;
//   - every $ref is rewritten by ref.
func Strict(s map[string]any, ref func(string) string) map[string]any {
	out := make(map[string]any, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	if r, ok := out["$ref"].(string); ok {
		out["$ref"] = ref(r)
	}
	intOrString := out["format"] == "int-or-string" || out["x-kubernetes-int-or-string"] == true
	if intOrString && out["anyOf"] == nil && out["oneOf"] == nil {
		delete(out, "type")
		delete(out, "format")
		out["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
	}
	if out["nullable"] == true {
		out["type"] = withNull(out["type"])
	}
	if props, ok := out["properties"].(map[string]any); ok {
		required := map[string]bool{}
		if req, ok := out["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		np := make(map[string]any, len(props))
		for name, p := range props {
			ps, ok := p.(map[string]any)
			if !ok {
				np[name] = p
				continue
			}
			ps = Strict(ps, ref)
			if !required[name] {
				ps["type"] = withNull(ps["type"])
				if ps["type"] == nil {
					delete(ps, "type")
				}
			}
			np[name] = ps
		}
		out["properties"] = np
		_, set := out["additionalProperties"]
		if !set && out["x-kubernetes-preserve-unknown-fields"] != true {
			out["additionalProperties"] = false
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := out[k].(map[string]any); ok {
			out[k] = Strict(sub, ref)
		}
	}
	for _, k := range []string{"items", "allOf", "anyOf", "oneOf"} {
		list, ok := out[k].([]any)
		if !ok {
			continue
		}
		nl := make([]any, len(list))
		for i, sub := range list {
			if m, ok := sub.(map[string]any); ok {
				nl[i] = Strict(m, ref)
			} else {
				nl[i] = sub
			}
		}
		out[k] = nl
	}
	return out
}

// withNull adds "null" to a JSON schema type; no type stays no type.
func withNull(t any) any {
	switch t := t.(type) {
	case string:
		if t == "null" {
			return t
		}
		return []any{t, "null"}
	case []any:
		for _, x := range t {
			if x == "null" {
				return t
			}
		}
		return append(append([]any{}, t...), "null")
	}
	return t
}
