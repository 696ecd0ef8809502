package mcpapi

import (
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
)

func TestBoundedKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 2 bytes each
	got := bounded(s, 51)
	if !utf8.ValidString(got) || len(got) > 51+len("…") {
		t.Fatalf("%q (%d bytes)", got, len(got))
	}
	if bounded("short", 10) != "short" {
		t.Fatal("a short string changed")
	}
}

func TestPreviewHeadAndTail(t *testing.T) {
	body := []byte(strings.Repeat("a", 100) + strings.Repeat("b", 100))
	head, tail := preview(body, 10)
	if head != strings.Repeat("a", 10) || tail != strings.Repeat("b", 10) {
		t.Fatalf("%q %q", head, tail)
	}
	head, tail = preview([]byte("tiny"), 10)
	if head != "tiny" || tail != "" {
		t.Fatalf("%q %q", head, tail)
	}
	head, _ = preview([]byte("xxxxxxxxx€"+strings.Repeat("z", 40)), 10) // the euro sign is cut
	if !utf8.ValidString(head) {
		t.Fatalf("%q", head)
	}
}

func TestObjectSchema(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"object","properties":{}}`: `{"type":"object","properties":{}}`,
		`{"properties":{}}`:                 `{"properties":{},"type":"object"}`,
		`{"type":"string"}`:                 `{"type":"object"}`,
		`not json`:                          `{"type":"object"}`,
	} {
		if got := string(objectSchema([]byte(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// One principal is one key whatever the order of its groups; tenant,
// subject, groups and roles each make another.
func TestPrincipalKey(t *testing.T) {
	a := principal.Principal{Tenant: "tenant-a", Subject: "alice", Groups: []string{"x", "y"}}
	b := a
	b.Groups = []string{"y", "x"}
	if principalKey(a) != principalKey(b) {
		t.Fatal("group order changed the key")
	}
	for _, other := range []principal.Principal{
		{Tenant: "tenant-b", Subject: "alice", Groups: []string{"x", "y"}},
		{Tenant: "tenant-a", Subject: "bob", Groups: []string{"x", "y"}},
		{Tenant: "tenant-a", Subject: "alice", Groups: []string{"x"}},
		{Tenant: "tenant-a", Subject: "alice", Groups: []string{"x", "y"}, Admin: true},
		{Tenant: "tenant-a", Subject: "alice\x00x", Groups: []string{"y"}},
	} {
		if principalKey(other) == principalKey(a) {
			t.Errorf("%+v shares alice's key", other)
		}
	}
}

func TestDenialNamesReasonAndAdvice(t *testing.T) {
	r := denial("POLICY_REVOKED", "revoked at epoch 5", "list tools again")
	if !r.IsError || r.Meta[MetaReason] != "POLICY_REVOKED" || len(r.Content) != 1 {
		t.Fatalf("%+v", r)
	}
}

// Each run of a principal gets its own state; another principal's run of
// the same id does not share it; past maxRunsPerPrincipal the least
// recently used run of that principal goes, and a run with a listener is
// kept.
func TestRunStatesArePerPrincipalAndBounded(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{Holder: key})
	alice := principal.Principal{Tenant: "tenant-a", Subject: "alice"}
	bob := principal.Principal{Tenant: "tenant-b", Subject: "alice"}
	plain, r1 := g.stateOf(alice, ""), g.stateOf(alice, "run-1")
	if plain == r1 || g.stateOf(alice, "run-1") != r1 || g.stateOf(bob, "run-1") == r1 || r1.runID != "run-1" || plain.runID != "" {
		t.Fatal("run states are not one per principal and run")
	}
	r1.mu.Lock()
	r1.listeners = 1 // listening: never the one evicted
	r1.mu.Unlock()
	base := time.Now()
	for i := 2; i <= maxRunsPerPrincipal; i++ {
		st := g.stateOf(alice, fmt.Sprintf("run-%d", i))
		st.lastUsed = base.Add(time.Duration(i) * time.Second)
	}
	g.stateOf(alice, "run-2").lastUsed = base.Add(time.Hour) // used last: kept
	g.stateOf(alice, "run-new")
	runs := 0
	for _, st := range g.principals {
		if st.pkey == principalKey(alice) && st.runID != "" {
			runs++
		}
	}
	if runs != maxRunsPerPrincipal {
		t.Fatalf("alice keeps %d run states, want %d", runs, maxRunsPerPrincipal)
	}
	has := func(p principal.Principal, run string) bool {
		for _, st := range g.principals {
			if st.pkey == principalKey(p) && st.runID == run {
				return true
			}
		}
		return false
	}
	if has(alice, "run-3") || !has(alice, "run-1") || !has(alice, "run-2") || !has(alice, "") || !has(bob, "run-1") {
		t.Fatal("evicted the wrong run state (want run-3, the least recently used without a listener)")
	}
}

// TestHandlerRefusesMalformedRunIDs: the run id header is held to
// platform/ids' run id grammar before a request reaches MCP.
func TestHandlerRefusesMalformedRunIDs(t *testing.T) {
	h := (&Gateway{}).Handler()
	for _, bad := range []string{"", "-run", "_r", "run id", "rün", strings.Repeat("r", 129), "r\x00"} {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header[RunIDHeader] = []string{bad}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if want := RunIDHeader + ": one run id of " + ids.RunIDSyntax + "\n"; rec.Code != http.StatusBadRequest || rec.Body.String() != want {
			t.Errorf("%q: %d %q, want 400 %q", bad, rec.Code, rec.Body.String(), want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header[RunIDHeader] = []string{"run-1", "run-2"}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("two run ids: %d, want 400", rec.Code)
	}
}
