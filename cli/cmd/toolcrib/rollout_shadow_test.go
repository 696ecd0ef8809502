package main

import (
	"encoding/json"
	"strings"
	"testing"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TestRolloutStaticAndDiff drives `rollout static set|show` and `rollout
// diff` against a real discovery service scanning a scripted MCP server:
// a YAML list (bare names, a digest, a schema) and a JSON one, the diff of
// each generation against the static list and the previous generation,
// by pair, --generation, --run and as JSON.
func TestRolloutStaticAndDiff(t *testing.T) {
	d := startDiscovery(t, nil)
	cat := discoverytest.NewCatalog("r-1", 2, discoverytest.Tools("inv", 3)...)
	mcpSrv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	d.httpServer("inventory", mcpSrv.URL)
	d.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.readers", TenantId: "tenant-a",
		Servers: []*registryv1.AudienceServer{{ServerId: "inventory"}}})
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := d.run(t.Context(), args...)
		if code != 0 {
			t.Fatalf("toolcrib %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		_, errOut, code := d.run(t.Context(), args...)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Fatalf("toolcrib %s: exit %d, want an error saying %q:\n%s", strings.Join(args, " "), code, want, errOut)
		}
	}

	yamlList := writeFile(t, "static.yaml", `server: inventory
audience_class: tenant-a.readers
reason: the list in the agent's prompt today
tools:
  - inv_0
  - name: inv_1
    input_schema: {type: object, properties: {id: {type: integer}}}
  - name: retired_tool
`)
	out := cli("rollout", "static", "set", "-f", yamlList)
	wantLines(t, out, `(?m)^version\s+1$`, `(?m)^reason\s+the list in the agent's prompt today$`, `(?m)^tools\s+3$`,
		`(?m)^inv_0\s+presence\s+-$`, `(?m)^inv_1\s+input schema\s+sha256:[0-9a-f]{64}$`, `(?m)^retired_tool\s+presence\s+-$`)
	wantLines(t, cli("rollout", "static", "show", "--server", "inventory", "--class", "tenant-a.readers"), `(?m)^version\s+1$`, `(?m)^set by\s+test-admin at `)

	cli("discovery", "scan", "--wait", "inventory")
	diff := cli("rollout", "diff", "--server", "inventory", "--class", "tenant-a.readers")
	wantLines(t, diff, `(?m)^generation\s+1$`, `(?m)^static list\s+version 1 \(current\)$`,
		`(?m)^against the static list \(version 1\): 1 missing, 1 extra, 1 changed, 1 same$`,
		`(?m)^  - retired_tool\s+missing$`, `(?m)^  \+ inv_2\s+extra$`, `(?m)^  ~ inv_1\s+changed input schema sha256:[0-9a-f]{12}… → sha256:[0-9a-f]{12}…$`,
		`(?m)^against the previous generation: none \(the pair's first generation\)$`)

	// Generation 2: inv_0 goes, inv_3 comes; a new list from JSON.
	cat.SetTools("r-2", discoverytest.Tool("inv_1"), discoverytest.Tool("inv_2"), discoverytest.Tool("inv_3"))
	cli("discovery", "scan", "--wait", "inventory")
	jsonList := writeFile(t, "static.json", `{"tools": [{"name": "inv_1"}, {"name": "inv_2"}, "inv_3"]}`)
	wantLines(t, cli("rollout", "static", "set", "-f", jsonList, "--reason", "after the review", "--version", "1", "inventory", "tenant-a.readers"),
		`(?m)^version\s+2$`, `(?m)^reason\s+after the review$`)
	diff = cli("rollout", "diff", "--generation", "2", "inventory", "tenant-a.readers")
	wantLines(t, diff, `(?m)^generation\s+2$`, `(?m)^static list\s+version 1; version 2 now: scan again to compare with it$`,
		`(?m)^against the static list \(version 1\): 2 missing, 2 extra, 1 changed, 0 same$`,
		`(?m)^  - inv_0\s+missing$`, `(?m)^  - retired_tool\s+missing$`, `(?m)^  \+ inv_2\s+extra$`, `(?m)^  \+ inv_3\s+extra$`, `(?m)^  ~ inv_1\s+changed input schema `,
		`(?m)^against generation 1 \(the previous one\): 1 missing, 1 extra, 0 changed, 2 same$`)
	var asJSON struct {
		Comparison struct {
			RunID           string `json:"runId"`
			AgainstPrevious struct {
				Missing []string `json:"missing"`
				Extra   []string `json:"extra"`
			} `json:"againstPrevious"`
		} `json:"comparison"`
		Current string `json:"currentStaticListVersion"`
	}
	if err := json.Unmarshal([]byte(cli("rollout", "diff", "--server", "inventory", "--class", "tenant-a.readers", "--json")), &asJSON); err != nil ||
		strings.Join(asJSON.Comparison.AgainstPrevious.Missing, ",") != "inv_0" || strings.Join(asJSON.Comparison.AgainstPrevious.Extra, ",") != "inv_3" ||
		asJSON.Current != "2" {
		t.Fatalf("diff as JSON: %+v %v", asJSON, err)
	}
	// The rescan compares generation 2 with version 2: nothing differs.
	cli("discovery", "scan", "--wait", "inventory")
	wantLines(t, cli("rollout", "diff", "inventory", "tenant-a.readers"), `(?m)^static list\s+version 2 \(current\)$`,
		`(?m)^against the static list \(version 2\): 0 missing, 0 extra, 0 changed, 3 same$`)
	// --run: generation 2's commit run, from the JSON diff above.
	wantLines(t, cli("rollout", "diff", "--run", asJSON.Comparison.RunID), `(?m)^generation\s+2$`, `(?m)^run\s+`+asJSON.Comparison.RunID+`$`)
	wantLines(t, cli("discovery", "run", asJSON.Comparison.RunID), `(?m)^vs static list:\s+version 1: 2 missing, 2 extra, 1 changed \(toolcrib rollout diff --run `,
		`(?m)^vs previous:\s+generation 1: 1 missing, 1 extra, 0 changed$`)

	fails("not both", "rollout", "diff", "--run", asJSON.Comparison.RunID, "--generation", "1")
	fails("give --server and --class", "rollout", "diff", "--server", "inventory")
	fails("not inventory/tenant-a.writers", "rollout", "static", "set", "-f", yamlList, "--class", "tenant-a.writers")
	fails("field colour not found", "rollout", "static", "set", "-f", writeFile(t, "bad.yaml", "tools: [{name: a, colour: red}]\n"), "inventory", "tenant-a.readers")
	fails("tools[1].name", "rollout", "static", "set", "-f", writeFile(t, "dup.yaml", "tools: [a, a]\n"), "inventory", "tenant-a.readers")
	fails("not at expected_version", "rollout", "static", "set", "--version", "1", "-f", jsonList, "inventory", "tenant-a.readers")
}

// FuzzStaticFile: any bytes either refuse to parse or give a list whose
// every entry has the name the file gave and, for a schema, JSON text.
func FuzzStaticFile(f *testing.F) {
	f.Add([]byte("server: a\naudience_class: t.c\ntools: [x, {name: y, descriptor_digest: 'sha256:00'}, {name: z, input_schema: {type: object}}]\n"))
	f.Add([]byte(`{"tools": [{"name": "a", "input_schema": {"a": [1, 2.5, null, true]}}]}`))
	f.Add([]byte("tools:\n  - &a {name: x}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parseStaticFile(b)
		if err != nil {
			return
		}
		tools, err := file.toProto()
		if err != nil {
			return
		}
		for i, tl := range tools {
			if tl.GetName() != file.Tools[i].Name {
				t.Fatalf("entry %d: name %q, file %q", i, tl.GetName(), file.Tools[i].Name)
			}
			if s := tl.GetInputSchema(); len(s) > 0 && !json.Valid(s) {
				t.Fatalf("entry %d: schema %q is not JSON", i, s)
			}
		}
	})
}
