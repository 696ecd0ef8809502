package admissionoracle

import (
	"strings"
	"testing"
	"time"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

var (
	now     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
)

// seed004 is seed 004's world: tenant demo-a, class demo-a.readers reading
// logistics at generation 7 (6 kept too), epoch 5 (4 kept: alice then held
// shipment:write as well), alice granted shipment:read.
func seed004() *State {
	status := Tool{Digest: digestA, Schema: Schema{Props: []Prop{{Name: "shipment_id", Type: "string"}}, Required: []string{"shipment_id"}}}
	cancel := Tool{Digest: digestB, Schema: Schema{}}
	tools := map[string]ToolReview{
		"logistics.shipment_status": {Enabled: true, Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, Approved: map[string]Contract{digestA: {Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: "shipment:read"}}},
		"logistics.cancel_shipment": {Enabled: true, Trust: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY, Approved: map[string]Contract{digestB: {Effect: catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, Scope: "shipment:write"}}},
	}
	classes := map[string][]string{"demo-a.readers": {"logistics"}}
	return &State{Now: now, Fresh: true,
		Tenants: map[string]*Tenant{"demo-a": {Epoch: 5, Policies: map[int64]*Policy{
			4: {Grants: []Grant{{Subject: "alice", Scopes: []string{"shipment:read", "shipment:write"}, Classes: []string{"demo-a.readers"}}}, Classes: classes, Tools: tools},
			5: {Grants: []Grant{{Subject: "alice", Scopes: []string{"shipment:read"}, Classes: []string{"demo-a.readers"}}}, Classes: classes, Tools: tools},
		}}, "demo-b": {Epoch: 1, Policies: map[int64]*Policy{1: {Classes: map[string][]string{}}}}},
		Pointers: map[PointerKey]*Pointer{{"logistics", "demo-a.readers"}: {Generation: 7, FreshUntil: now.Add(time.Hour)}},
		Generations: map[GenKey]map[string]Tool{
			{"logistics", "demo-a.readers", 7}: {"logistics.shipment_status": status, "logistics.cancel_shipment": cancel},
			{"logistics", "demo-a.readers", 6}: {"logistics.shipment_status": status},
		},
	}
}

func call() Request {
	return Request{Subject: "alice", Tenant: "demo-a", ToolID: "logistics.shipment_status", Generation: 7, Digest: digestA,
		PlanEpoch: 5, Mode: admissionv1.Mode_MODE_AUTONOMOUS, Arguments: []byte(`{"shipment_id":"S-1"}`)}
}

// TestOracleReadsDesignSection7 pins the oracle to hand-decided cases of
// DESIGN §7 (each adjacent pair where two causes hold), so that an oracle
// bug cannot hide behind agreement with an admission bug.
func TestOracleReadsDesignSection7(t *testing.T) {
	for _, c := range []struct {
		name  string
		state func(*State)
		req   func(*Request)
		want  catalogv1.DecisionReason
	}{
		{"the seed's allowed call", nil, nil, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"compatible older generation", nil, func(r *Request) { r.Generation = 6 }, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"invalid input before another tenant's class", nil, func(r *Request) { r.Class = "demo-b.readers"; r.Digest = "sha256:x" }, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"another tenant's class before stale policy", func(s *State) { s.Fresh = false }, func(r *Request) { r.Class = "demo-b.nope" }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"stale policy before not found", func(s *State) { s.Fresh = false }, func(r *Request) { r.ToolID = "logistics.ghost" }, catalogv1.DecisionReason_DECISION_REASON_STALE_POLICY},
		{"another tenant's principal: not found, not forbidden", nil, func(r *Request) { r.Tenant = "demo-b" }, catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND},
		{"not found before closed", func(s *State) { s.Pointers[PointerKey{"logistics", "demo-a.readers"}].Closed = true },
			func(r *Request) { r.ToolID = "logistics.ghost" }, catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND},
		{"closed before stale catalog", func(s *State) {
			p := s.Pointers[PointerKey{"logistics", "demo-a.readers"}]
			p.Closed, p.FreshUntil = true, now.Add(-time.Second)
		}, nil, catalogv1.DecisionReason_DECISION_REASON_SERVER_CLOSED},
		{"no proven generation", func(s *State) { delete(s.Pointers, PointerKey{"logistics", "demo-a.readers"}) }, nil, catalogv1.DecisionReason_DECISION_REASON_INCOMPLETE_DISCOVERY},
		{"past fresh_until serves nothing", func(s *State) { s.Pointers[PointerKey{"logistics", "demo-a.readers"}].FreshUntil = now }, nil, catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG},
		{"plan generation newer than active", nil, func(r *Request) { r.Generation = 8 }, catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG},
		{"stale catalog before disabled", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.cancel_shipment"] = ToolReview{}
		}, func(r *Request) { r.ToolID, r.Generation, r.Digest = "logistics.cancel_shipment", 6, digestB }, catalogv1.DecisionReason_DECISION_REASON_STALE_CATALOG},
		{"disabled before unreviewed", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"] = ToolReview{Enabled: false}
		}, nil, catalogv1.DecisionReason_DECISION_REASON_DISABLED},
		{"unknown to the registry is disabled", func(s *State) { delete(s.Tenants["demo-a"].Policies[5].Tools, "logistics.shipment_status") }, nil, catalogv1.DecisionReason_DECISION_REASON_DISABLED},
		{"unreviewed before stale schema", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"] = ToolReview{Enabled: true}
		}, func(r *Request) { r.Digest = digestB }, catalogv1.DecisionReason_DECISION_REASON_UNREVIEWED},
		{"a principal without grants: not found", nil, func(r *Request) { r.Subject = "mallory"; r.Digest = digestB }, catalogv1.DecisionReason_DECISION_REASON_NOT_FOUND},
		{"stale schema before forbidden", nil, func(r *Request) { r.ToolID, r.Digest = "logistics.cancel_shipment", digestA }, catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA},
		{"stale schema", nil, func(r *Request) { r.Digest = digestB }, catalogv1.DecisionReason_DECISION_REASON_STALE_SCHEMA},
		{"revoked since the plan's epoch", nil, func(r *Request) { r.ToolID, r.Digest, r.PlanEpoch = "logistics.cancel_shipment", digestB, 4 }, catalogv1.DecisionReason_DECISION_REASON_POLICY_REVOKED},
		{"never granted: forbidden", nil, func(r *Request) { r.ToolID, r.Digest = "logistics.cancel_shipment", digestB }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"plan epoch no longer kept: forbidden, never guessed", func(s *State) { delete(s.Tenants["demo-a"].Policies, 4) },
			func(r *Request) { r.ToolID, r.Digest, r.PlanEpoch = "logistics.cancel_shipment", digestB, 4 }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"forbidden before unversioned", func(s *State) { s.Pointers[PointerKey{"logistics", "demo-a.readers"}].Unversioned = true },
			func(r *Request) { r.ToolID, r.Digest = "logistics.cancel_shipment", digestB }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"reservation from an unversioned source", func(s *State) {
			s.Pointers[PointerKey{"logistics", "demo-a.readers"}].Unversioned = true
			s.Tenants["demo-a"].Policies[5].Grants[0].Scopes = []string{"shipment:read", "shipment:write"}
		}, func(r *Request) { r.ToolID, r.Digest = "logistics.cancel_shipment", digestB }, catalogv1.DecisionReason_DECISION_REASON_UNVERSIONED_SOURCE},
		{"read-only from an unversioned source", func(s *State) { s.Pointers[PointerKey{"logistics", "demo-a.readers"}].Unversioned = true }, nil, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"reservation needs no confirmation", func(s *State) { s.Tenants["demo-a"].Policies[5].Grants[0].Scopes = []string{"shipment:write"} },
			func(r *Request) { r.ToolID, r.Digest, r.Arguments = "logistics.cancel_shipment", digestB, nil }, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"unspecified effect is destructive", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"].Approved[digestA] = Contract{Scope: "shipment:read"}
		}, nil, catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED},
		{"confirmation always, even read-only", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"].Approved[digestA] = Contract{Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
				Scope: "shipment:read", Confirmation: registryv1.Confirmation_CONFIRMATION_ALWAYS}
		}, nil, catalogv1.DecisionReason_DECISION_REASON_CONFIRMATION_REQUIRED},
		{"invalid arguments before confirmation (issue 25)", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"].Approved[digestA] = Contract{Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
				Scope: "shipment:read", Confirmation: registryv1.Confirmation_CONFIRMATION_ALWAYS}
		}, func(r *Request) { r.Arguments = []byte(`{}`) }, catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID},
		{"unmet condition before confirmation", func(s *State) {
			p := s.Tenants["demo-a"].Policies[5]
			p.Tools["logistics.shipment_status"].Approved[digestA] = Contract{Scope: "shipment:read"}
			for i := range p.Grants {
				p.Grants[i].Condition = Cond{Kind: CondRun}
			}
		}, nil, catalogv1.DecisionReason_DECISION_REASON_CONDITION_UNMET},
		{"condition met", func(s *State) {
			p := s.Tenants["demo-a"].Policies[5]
			for i := range p.Grants {
				p.Grants[i].Condition = Cond{Kind: CondRun}
			}
		}, func(r *Request) { r.RunID = "run-1" }, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"condition on another principal's grant does not bind", func(s *State) {
			p := s.Tenants["demo-a"].Policies[5]
			p.Grants = append(p.Grants, Grant{Subject: "mallory", Scopes: []string{"shipment:read"}, Classes: []string{"demo-a.readers"}, Condition: Cond{Kind: CondFalse}})
		}, nil, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"user confirmed", func(s *State) {
			s.Tenants["demo-a"].Policies[5].Tools["logistics.shipment_status"].Approved[digestA] = Contract{Scope: "shipment:read"}
		}, func(r *Request) { r.Mode, r.Confirmer = admissionv1.Mode_MODE_USER_CONFIRMED, PlatformConfirmer }, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"user confirmed, shown digest", nil, func(r *Request) {
			r.Mode, r.Confirmer, r.ShownDigest = admissionv1.Mode_MODE_USER_CONFIRMED, PlatformConfirmer, digestB
		}, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
		{"user confirmed by no confirmer", nil, func(r *Request) { r.Mode = admissionv1.Mode_MODE_USER_CONFIRMED }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"user confirmed by a tenant's confirmer group", nil, func(r *Request) {
			r.Mode, r.Confirmer = admissionv1.Mode_MODE_USER_CONFIRMED, TenantConfirmerGroup
		}, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"user confirmed by a service", nil, func(r *Request) { r.Mode, r.Confirmer = admissionv1.Mode_MODE_USER_CONFIRMED, PlatformService }, catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"no confirmer before stale policy", func(s *State) { s.Fresh = false }, func(r *Request) { r.Mode = admissionv1.Mode_MODE_USER_CONFIRMED },
			catalogv1.DecisionReason_DECISION_REASON_FORBIDDEN},
		{"invalid input before no confirmer", nil, func(r *Request) { r.Mode, r.ToolID = admissionv1.Mode_MODE_USER_CONFIRMED, "" },
			catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"shown digest on an autonomous call", nil, func(r *Request) { r.ShownDigest = digestB }, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"malformed shown digest", nil, func(r *Request) {
			r.Mode, r.Confirmer, r.ShownDigest = admissionv1.Mode_MODE_USER_CONFIRMED, PlatformConfirmer, "sha256:x"
		}, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"arguments against the schema", nil, func(r *Request) { r.Arguments = []byte(`{"shipment_id":7}`) }, catalogv1.DecisionReason_DECISION_REASON_ARGUMENTS_INVALID},
		{"arguments not an object", nil, func(r *Request) { r.Arguments = []byte(`[]`) }, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"duplicate member names", nil, func(r *Request) { r.Arguments = []byte(`{"shipment_id":"a","shipment_id":"b"}`) }, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"a number no double holds", nil, func(r *Request) { r.Arguments = []byte(`{"shipment_id":"a","n":1e999}`) }, catalogv1.DecisionReason_DECISION_REASON_INVALID_INPUT},
		{"an integer written 2.0", func(s *State) {
			g := s.Generations[GenKey{"logistics", "demo-a.readers", 7}]
			g["logistics.shipment_status"] = Tool{Digest: digestA, Schema: Schema{Props: []Prop{{Name: "n", Type: "integer"}}, Required: []string{"n"}}}
		}, func(r *Request) { r.Arguments = []byte(`{"n":2.0}`) }, catalogv1.DecisionReason_DECISION_REASON_ALLOW},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, r := seed004(), call()
			if c.state != nil {
				c.state(s)
			}
			if c.req != nil {
				c.req(&r)
			}
			if got := Decide(s, r); got != c.want {
				t.Fatalf("%v, want %v", got, c.want)
			}
		})
	}
}
