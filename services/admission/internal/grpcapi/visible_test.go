package grpcapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
	"github.com/toolcrib/toolcrib/services/admission/internal/replica"
)

// TestListedIffCheckWouldAllowOrAsk is the property that ties who may see
// a tool to who may call it: in random worlds (grants, classes, pointer
// states, reviews, trust levels, confirmation policies, rollout stages,
// runs), a tool ListVisibleTools lists is one whose Check — the tool at
// the listed generation and digest, through the listed class, for the
// run, autonomously — answers ALLOW, CONFIRMATION_REQUIRED or
// UNVERSIONED_SOURCE, and every tool of every generation the principal's
// classes read that Check answers so is listed.
//
// Each round is a new epoch of demo-a with new server ids, so nothing the
// replica cached in an earlier round answers for this one.
func TestListedIffCheckWouldAllowOrAsk(t *testing.T) {
	src := world()
	r := newRig(t, src, nil)
	c := r.client(t, "alice", "demo-a")
	classes := []string{"demo-a.a", "demo-a.b"}
	scopes := []string{"s:r", "s:w"}
	digests := []string{digA, digB}
	effects := []catalogv1.EffectClass{catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED, catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		catalogv1.EffectClass_EFFECT_CLASS_RESERVATION, catalogv1.EffectClass_EFFECT_CLASS_WRITE, catalogv1.EffectClass_EFFECT_CLASS_DESTRUCTIVE}
	confirmations := []registryv1.Confirmation{registryv1.Confirmation_CONFIRMATION_UNSPECIFIED,
		registryv1.Confirmation_CONFIRMATION_ALWAYS, registryv1.Confirmation_CONFIRMATION_AUTONOMOUS_ALLOWED}
	trusts := []registryv1.TrustLevel{registryv1.TrustLevel_TRUST_LEVEL_UNSPECIFIED, registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		registryv1.TrustLevel_TRUST_LEVEL_PARTNER, registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY}
	subset := func(rt *rapid.T, of []string, label string) []string {
		var out []string
		for _, s := range of {
			if rapid.Bool().Draw(rt, label+" "+s) {
				out = append(out, s)
			}
		}
		return out
	}
	round := int64(5)
	type listedKey struct{ tool, class string }
	rapid.Check(t, func(rt *rapid.T) {
		round++
		pol := replica.Policy{Tenant: "demo-a", Epoch: round, Classes: map[string][]string{},
			Stages: map[replica.StageKey]*decision.Rollout{}}
		pol.Grants = []decision.Grant{{Subject: "alice", Scopes: subset(rt, scopes, "scope"), Classes: subset(rt, classes, "class")}}
		type probe struct {
			class, tool, digest string
			gen                 int64
		}
		var probes []probe
		servers := []string{fmt.Sprintf("x%d", round), fmt.Sprintf("y%d", round)}
		src.mu.Lock()
		for _, srv := range servers {
			for _, cl := range classes {
				if rapid.Bool().Draw(rt, "reads "+srv+" "+cl) {
					pol.Classes[cl] = append(pol.Classes[cl], srv)
				}
				switch rapid.IntRange(0, 3).Draw(rt, "stage "+srv+" "+cl) {
				case 1:
					pol.Stages[replica.StageKey{Server: srv, Class: cl}] = &decision.Rollout{Stage: registryv1.Stage_STAGE_SHADOW}
				case 2:
					ro := &decision.Rollout{Stage: registryv1.Stage_STAGE_CANARY, Percent: int32(rapid.IntRange(0, 100).Draw(rt, "percent"))}
					for _, e := range effects {
						if rapid.Bool().Draw(rt, "canary effect") {
							ro.Effects = append(ro.Effects, e)
						}
					}
					pol.Stages[replica.StageKey{Server: srv, Class: cl}] = ro
				case 3:
					pol.Stages[replica.StageKey{Server: srv, Class: cl}] = &decision.Rollout{Stage: registryv1.Stage_STAGE_FULL}
				}
				state := rapid.IntRange(0, 4).Draw(rt, "pointer "+srv+" "+cl) // absent, open, closed, stale, unversioned
				if state == 0 {
					continue
				}
				gen := rapid.Int64Range(1, 3).Draw(rt, "generation")
				ptr := replica.Pointer{ServerID: srv, Class: cl, Tenant: "demo-a", Generation: gen,
					FreshUntil: time.Now().Add(time.Hour), Revision: 1, Closed: state == 2, Unversioned: state == 4}
				if state == 3 {
					ptr.FreshUntil = time.Now().Add(-time.Second)
				}
				src.pointers[[2]string{srv, cl}] = ptr
				g := &replica.Generation{ServerID: srv, Class: cl, Generation: gen, Tools: map[string]*replica.ToolEntry{}}
				for _, name := range []string{"t1", "t2", "t3"} {
					if !rapid.Bool().Draw(rt, "lists "+name) {
						continue
					}
					id := srv + "." + name
					dig := rapid.SampledFrom(digests).Draw(rt, "digest")
					g.Tools[id] = &replica.ToolEntry{ToolID: id, Name: name, Description: "a tool", DescriptorDigest: dig,
						InputSchemaDigest: digA, InputSchema: []byte(`{"type":"object"}`)}
					probes = append(probes, probe{cl, id, dig, gen})
					rv := decision.Review{Known: rapid.Bool().Draw(rt, "known"), Enabled: rapid.Bool().Draw(rt, "enabled"),
						Trust: rapid.SampledFrom(trusts).Draw(rt, "trust")}
					if rapid.Bool().Draw(rt, "approved") {
						rv.Approved = &decision.Contract{Effect: rapid.SampledFrom(effects).Draw(rt, "effect"),
							Scope: rapid.SampledFrom(scopes).Draw(rt, "contract scope"), Confirmation: rapid.SampledFrom(confirmations).Draw(rt, "confirmation")}
					}
					src.reviews[id+"@"+dig] = rv
				}
				src.gens[[2]string{srv, cl}] = map[int64]*replica.Generation{gen: g}
			}
		}
		src.policies["demo-a"] = append(src.policies["demo-a"], pol)
		src.mu.Unlock()
		r.heads.SetEpoch("demo-a", round)
		r.heads.Heartbeat(changelog.RegistryHead)
		r.heads.Heartbeat(changelog.DiscoveryHead)
		run := rapid.SampledFrom([]string{"", "run-1", "run-2", "run-3"}).Draw(rt, "run")

		resp, err := c.ListVisibleTools(context.Background(), &admissionv1.ListVisibleToolsRequest{RunId: run})
		if err != nil {
			rt.Fatalf("ListVisibleTools: %v", err)
		}
		if resp.GetPolicyEpoch() != round {
			rt.Fatalf("listed at epoch %d, want %d", resp.GetPolicyEpoch(), round)
		}
		listed := map[listedKey]*admissionv1.RuntimeTool{}
		for _, vt := range resp.GetTools() {
			listed[listedKey{vt.GetRuntime().GetToolId(), vt.GetRuntime().GetAudienceClass()}] = vt.GetRuntime()
		}
		for _, p := range probes {
			got, err := c.Check(context.Background(), &admissionv1.CheckRequest{ToolId: p.tool, Generation: p.gen,
				DescriptorDigest: p.digest, Arguments: []byte(`{}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS,
				RunId: run, AudienceClass: p.class})
			if err != nil {
				rt.Fatalf("Check %s via %s: %v", p.tool, p.class, err)
			}
			rtool, isListed := listed[listedKey{p.tool, p.class}]
			if isListed != decision.Listable(got.GetReason()) {
				rt.Fatalf("%s via %s (generation %d, run %q): listed %v, but Check answers %v (%s)",
					p.tool, p.class, p.gen, run, isListed, got.GetReason(), got.GetDetail())
			}
			if isListed && (rtool.GetGeneration() != p.gen || rtool.GetDescriptorDigest() != p.digest) {
				rt.Fatalf("%s via %s listed at generation %d digest %s, want %d %s", p.tool, p.class,
					rtool.GetGeneration(), rtool.GetDescriptorDigest(), p.gen, p.digest)
			}
			delete(listed, listedKey{p.tool, p.class})
		}
		if len(listed) != 0 {
			rt.Fatalf("listed tools no generation of this round holds: %v", listed)
		}
	})
}
