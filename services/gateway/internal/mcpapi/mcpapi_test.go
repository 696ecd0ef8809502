package mcpapi

import (
	"strings"
	"testing"
	"unicode/utf8"

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
