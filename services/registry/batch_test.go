package registry_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// TestGetBindingsReadsEachPairAsGetBinding: GetBindings answers every pair
// exactly as GetBinding does (covered, uncovered, unknown server, unknown
// class), in the request's order, with NOT_FOUND per pair; only admins
// and services may call it; bad names and an empty or oversized batch are
// INVALID_ARGUMENT.
func TestGetBindingsReadsEachPairAsGetBinding(t *testing.T) {
	r, ctx, admin := startFixture(t)
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: tenant + ".empty", TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	reads := []*registryv1.GetBindingRequest{
		{ServerId: server, AudienceClass: class},
		{ServerId: "nope", AudienceClass: class},
		{ServerId: server, AudienceClass: tenant + ".empty"},
		{ServerId: server, AudienceClass: tenant + ".nope"},
	}
	svc := r.Client(t, r.Auth.Service(t))
	got, err := svc.GetBindings(ctx, &registryv1.GetBindingsRequest{Reads: reads})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetResults()) != len(reads) {
		t.Fatalf("%d results for %d reads", len(got.GetResults()), len(reads))
	}
	wantNotFound := []string{"", "server", "", "audience class"}
	for i, req := range reads {
		res := got.GetResults()[i]
		if res.GetNotFound() != wantNotFound[i] {
			t.Fatalf("read %d: not_found %q, want %q", i, res.GetNotFound(), wantNotFound[i])
		}
		if wantNotFound[i] != "" {
			if res.GetBinding() != nil {
				t.Fatalf("read %d: a binding with not_found: %v", i, res)
			}
			continue
		}
		one, err := svc.GetBinding(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		// The revision is the log head of each read; nothing moved it.
		if !proto.Equal(one, res.GetBinding()) {
			t.Fatalf("read %d: GetBindings %v, GetBinding %v", i, res.GetBinding(), one)
		}
	}
	if got.GetResults()[0].GetBinding().GetBinding().GetSecretRef() != "env:LOGISTICS_TOKEN" || got.GetResults()[2].GetBinding().GetBinding() != nil {
		t.Fatalf("bindings %v", got)
	}

	// A user of the server's tenant, and one of another tenant, may not
	// read bindings (their credentials' references) in bulk.
	for _, tok := range []string{r.Auth.User(t, "alice", tenant, "readers"), r.Auth.User(t, "bob", tenantB, "readers")} {
		_, err = r.Client(t, tok).GetBindings(ctx, &registryv1.GetBindingsRequest{Reads: reads})
		wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	}
	_, err = admin.GetBindings(ctx, &registryv1.GetBindingsRequest{})
	wantFields(t, err, "reads")
	_, err = admin.GetBindings(ctx, &registryv1.GetBindingsRequest{Reads: []*registryv1.GetBindingRequest{{ServerId: "Bad Id"}}})
	wantFields(t, err, "reads[0].audience_class", "reads[0].server_id")
}

// TestPinIdentitiesSetsEmptyPinsOnly: PinIdentities sets an empty pin at
// the version read (GetServer sees it), answers a stale version with the stored server, a second pin
// of the same server in one call as a mismatch against the first's
// version, an unknown server as NOT_FOUND and a set pin as ALREADY_PINNED,
// each without touching the others; only admins and services may call it.
func TestPinIdentitiesSetsEmptyPinsOnly(t *testing.T) {
	r, ctx, admin := startFixture(t)
	const pinA, pinB = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	before, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		t.Fatal(err)
	}
	if before.GetServer().GetIdentityPin() != "" {
		t.Fatalf("the fixture's server is pinned: %v", before)
	}
	v := before.GetServer().GetVersion()
	svc := r.Client(t, r.Auth.Service(t))
	got, err := svc.PinIdentities(ctx, &registryv1.PinIdentitiesRequest{Pins: []*registryv1.IdentityPin{
		{ServerId: "nope", ExpectedVersion: 1, IdentityPin: pinA},
		{ServerId: server, ExpectedVersion: v + 5, IdentityPin: pinA},
		{ServerId: server, ExpectedVersion: v, IdentityPin: pinA},
		{ServerId: server, ExpectedVersion: v, IdentityPin: pinB},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := got.GetResults()
	if len(res) != 4 {
		t.Fatalf("results %v", res)
	}
	stored, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		t.Fatal(err)
	}
	s := stored.GetServer()
	if s.GetIdentityPin() != pinA || s.GetVersion() != v+1 {
		t.Fatalf("stored after the pins: %v", s)
	}
	want := []registryv1.PinOutcome{registryv1.PinOutcome_PIN_OUTCOME_NOT_FOUND, registryv1.PinOutcome_PIN_OUTCOME_VERSION_MISMATCH,
		registryv1.PinOutcome_PIN_OUTCOME_PINNED, registryv1.PinOutcome_PIN_OUTCOME_VERSION_MISMATCH}
	for i, w := range want {
		if res[i].GetOutcome() != w {
			t.Fatalf("pin %d: %v, want %v", i, res[i].GetOutcome(), w)
		}
	}
	if res[0].GetServer() != nil {
		t.Fatalf("NOT_FOUND with a server: %v", res[0])
	}
	for i := 1; i < 4; i++ {
		if !proto.Equal(res[i].GetServer(), s) {
			t.Fatalf("pin %d: server %v, stored %v", i, res[i].GetServer(), s)
		}
	}

	// The pin is set now: at its version it is ALREADY_PINNED.
	again, err := svc.PinIdentities(ctx, &registryv1.PinIdentitiesRequest{Pins: []*registryv1.IdentityPin{
		{ServerId: server, ExpectedVersion: s.GetVersion(), IdentityPin: pinB}}})
	if err != nil || again.GetResults()[0].GetOutcome() != registryv1.PinOutcome_PIN_OUTCOME_ALREADY_PINNED ||
		again.GetResults()[0].GetServer().GetIdentityPin() != pinA {
		t.Fatalf("a second pin: %v %v", again, err)
	}

	// Nor may a user of the server's tenant or of another tenant pin.
	for _, tok := range []string{r.Auth.User(t, "alice", tenant, "readers"), r.Auth.User(t, "bob", tenantB, "readers")} {
		_, err = r.Client(t, tok).PinIdentities(ctx, &registryv1.PinIdentitiesRequest{
			Pins: []*registryv1.IdentityPin{{ServerId: server, ExpectedVersion: 1, IdentityPin: pinA}}})
		wantCode(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
	}
	_, err = admin.PinIdentities(ctx, &registryv1.PinIdentitiesRequest{Pins: []*registryv1.IdentityPin{{ServerId: server, IdentityPin: "sha256:x"}}})
	wantFields(t, err, "pins[0].expected_version", "pins[0].identity_pin")
}
