package registry_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

const (
	readOnly = catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	write    = catalogv1.EffectClass_EFFECT_CLASS_WRITE
	shadow   = registryv1.Stage_STAGE_SHADOW
	canary   = registryv1.Stage_STAGE_CANARY
	full     = registryv1.Stage_STAGE_FULL
)

func setStage(t *testing.T, c registryv1.RegistryServiceClient, req *registryv1.SetRolloutStageRequest) *registryv1.SetRolloutStageResponse {
	t.Helper()
	resp, err := c.SetRolloutStage(ctxT(t), req)
	if err != nil {
		t.Fatalf("SetRolloutStage %v: %v", req, err)
	}
	return resp
}

func stageReq(stage registryv1.Stage, reason string) *registryv1.SetRolloutStageRequest {
	return &registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: stage, Reason: reason}
}

func policyStage(t *testing.T, c registryv1.RegistryServiceClient, atEpoch int64) *registryv1.RolloutStage {
	t.Helper()
	resp, err := c.GetPolicy(ctxT(t), &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: atEpoch})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.GetPolicy().GetRolloutStages() {
		if st.GetServerId() == server && st.GetAudienceClass() == class {
			return st
		}
	}
	t.Fatalf("policy at epoch %d has no stage for %s/%s: %v", atEpoch, class, server, resp.GetPolicy().GetRolloutStages())
	return nil
}

// A pair never set is FULL at version 0 (today's behaviour, kept by the
// migration); SHADOW → CANARY (defaults 5 % and read-only) → wider CANARY
// → FULL → SHADOW each bump the tenant's epoch by one, are recorded with
// reason and actor in the history, and show in GetPolicy now and at every
// past epoch. Setting the stored stage again changes nothing.
func TestRolloutStageTransitionsHistoryAndEpochs(t *testing.T) {
	_, ctx, admin := startFixture(t)

	got, err := admin.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: class})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetRolloutStage(); st.GetStage() != full || st.GetVersion() != 0 || st.GetTenantId() != tenant {
		t.Fatalf("a pair never set: %v, want FULL at version 0", st)
	}
	before := epochOf(t, admin, tenant)
	if st := policyStage(t, admin, 0); st.GetStage() != full || st.GetVersion() != 0 {
		t.Fatalf("policy stage of a pair never set: %v", st)
	}
	// FULL on a pair never set is what it already is: no bump.
	if resp := setStage(t, admin, stageReq(full, "no-op")); resp.GetChanged() || resp.GetPolicyEpoch() != before {
		t.Fatalf("setting the default stage: %v, epoch was %d", resp, before)
	}

	type step struct {
		req         *registryv1.SetRolloutStageRequest
		wantPercent int32
		wantEffects []catalogv1.EffectClass
	}
	wider := stageReq(canary, "read-only looked fine; open writes to a quarter")
	wider.CanaryPercent = proto.Int32(25)
	wider.CanaryEffects = []catalogv1.EffectClass{write, readOnly, write}
	steps := []step{
		{req: stageReq(shadow, "compare with the static list first")},
		{req: stageReq(canary, "shadow diff is clean"), wantPercent: 5, wantEffects: []catalogv1.EffectClass{readOnly}},
		{req: wider, wantPercent: 25, wantEffects: []catalogv1.EffectClass{readOnly, write}},
		{req: stageReq(full, "canary clean for a day")},
		{req: stageReq(shadow, "back to shadow: incident 7")},
	}
	epochs := []int64{}
	for i, s := range steps {
		resp := setStage(t, admin, s.req)
		st := resp.GetRolloutStage()
		if !resp.GetChanged() || resp.GetPolicyEpoch() != before+int64(i)+1 || st.GetPolicyEpoch() != resp.GetPolicyEpoch() {
			t.Fatalf("step %d: %v, want a bump to %d", i, resp, before+int64(i)+1)
		}
		if st.GetStage() != s.req.GetStage() || st.GetCanaryPercent() != s.wantPercent || !slices.Equal(st.GetCanaryEffects(), s.wantEffects) ||
			st.GetVersion() != int64(i)+1 || st.GetChangedBy() != "test-admin" || st.GetReason() != s.req.GetReason() || st.GetRevision() == 0 {
			t.Fatalf("step %d stored %v", i, st)
		}
		epochs = append(epochs, resp.GetPolicyEpoch())
		// The same stage again (another reason) changes nothing.
		again := proto.Clone(s.req).(*registryv1.SetRolloutStageRequest)
		again.Reason = "again"
		if r2 := setStage(t, admin, again); r2.GetChanged() || r2.GetPolicyEpoch() != resp.GetPolicyEpoch() || r2.GetRolloutStage().GetVersion() != st.GetVersion() {
			t.Fatalf("step %d repeated: %v", i, r2)
		}
	}
	if e := epochOf(t, admin, tenant); e != before+int64(len(steps)) {
		t.Fatalf("epoch %d after %d changes from %d", e, len(steps), before)
	}

	// History: every change, oldest first, with its reason and epoch.
	got, err = admin.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: class, IncludeHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetHistory()) != len(steps) {
		t.Fatalf("history %v, want %d entries", got.GetHistory(), len(steps))
	}
	for i, h := range got.GetHistory() {
		if h.GetStage() != steps[i].req.GetStage() || h.GetReason() != steps[i].req.GetReason() || h.GetPolicyEpoch() != epochs[i] || h.GetVersion() != int64(i)+1 {
			t.Fatalf("history[%d] = %v", i, h)
		}
	}
	if h, cur := got.GetHistory()[len(steps)-1], got.GetRolloutStage(); !proto.Equal(h, cur) {
		t.Fatalf("newest history entry %v differs from the current stage %v", h, cur)
	}

	// GetPolicy at each epoch shows the stage in force then; at the epoch
	// before the first change, the default. The current policy read both
	// ways is the same.
	if st := policyStage(t, admin, before); st.GetStage() != full || st.GetVersion() != 0 {
		t.Fatalf("stage at epoch %d (before any change): %v", before, st)
	}
	for i, e := range epochs {
		st := policyStage(t, admin, e)
		if !proto.Equal(got.GetHistory()[i], st) {
			t.Fatalf("stage at epoch %d: %v, history says %v", e, st, got.GetHistory()[i])
		}
	}
	now, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant})
	if err != nil {
		t.Fatal(err)
	}
	at, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: now.GetPolicy().GetPolicyEpoch()})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := now.GetPolicy().GetRolloutStages(), at.GetPolicy().GetRolloutStages(); !slices.EqualFunc(a, b, func(x, y *registryv1.RolloutStage) bool { return proto.Equal(x, y) }) {
		t.Fatalf("current policy's stages %v differ from the policy's at the current epoch %v", a, b)
	}

	// A stale expected version is refused; the current one is accepted.
	stale := stageReq(full, "go")
	stale.ExpectedVersion = 1
	_, err = admin.SetRolloutStage(ctx, stale)
	wantCode(t, err, codes.Aborted, "VERSION_MISMATCH")
	stale.ExpectedVersion = int64(len(steps))
	if resp := setStage(t, admin, stale); !resp.GetChanged() || resp.GetRolloutStage().GetVersion() != int64(len(steps))+1 {
		t.Fatalf("with the current version: %v", resp)
	}
}

// A stage change is on Watch: the RolloutStage change and then the
// PolicyChange with cause ROLLOUT_STAGE, both seen by the tenant's own
// principals, so admission replicas can follow it.
func TestRolloutStageOnWatch(t *testing.T) {
	r, ctx, admin := startFixture(t)
	head, err := admin.ListServers(ctx, &registryv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	resp := setStage(t, admin, stageReq(shadow, "new catalog"))

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := r.Client(t, r.Auth.User(t, "alice", tenant, "readers")).Watch(wctx, &registryv1.WatchRequest{FromRevision: head.GetRevision()})
	if err != nil {
		t.Fatal(err)
	}
	var changes []*registryv1.Change
	for len(changes) < 2 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", changes, err)
		}
		if ch := ev.GetChange(); ch != nil {
			changes = append(changes, ch)
		}
	}
	st := changes[0].GetRolloutStage()
	if st.GetStage() != shadow || st.GetAudienceClass() != class || changes[0].GetKind() != registryv1.ChangeKind_CHANGE_KIND_CREATED ||
		changes[0].GetRevision() != resp.GetRolloutStage().GetRevision() {
		t.Fatalf("first change %v, want the SHADOW stage at revision %d", changes[0], resp.GetRolloutStage().GetRevision())
	}
	pc := changes[1].GetPolicy()
	if pc.GetCauseCode() != registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_ROLLOUT_STAGE || pc.GetPolicyEpoch() != resp.GetPolicyEpoch() || pc.GetTenantId() != tenant {
		t.Fatalf("second change %v, want the ROLLOUT_STAGE bump to %d", changes[1], resp.GetPolicyEpoch())
	}
}

// Stages are tenant-scoped like audience classes: another tenant's class is
// NOT_FOUND (byte for byte as a class that does not exist) for Get and Set,
// and absent from List. The server's owner may set stages for its own
// tenant's classes; a reader may not; a service may read but not set.
func TestRolloutStageTenancyAndAuthorization(t *testing.T) {
	r, ctx, admin := startFixture(t)
	reader := r.Client(t, r.Auth.User(t, "alice", tenant, "readers"))
	owner := r.Client(t, r.Auth.User(t, "lee", tenant, owners))
	service := r.Client(t, r.Auth.Service(t))
	clients := map[string]registryv1.RegistryServiceClient{"reader": reader, "owner": owner}

	getB := &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: privateClassB}
	setB := &registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: privateClassB, Stage: full, Reason: "x"}
	missing := map[string][2]refusal{}
	for name, c := range clients {
		_, errGet := c.GetRolloutStage(ctx, getB)
		_, errSet := c.SetRolloutStage(ctx, setB)
		missing[name] = [2]refusal{refusalOf(t, errGet), refusalOf(t, errSet)}
	}
	putTenantB(t, admin)
	setStage(t, admin, &registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: privateClassB, Stage: shadow, Reason: "b first"})

	for name, c := range clients {
		_, errGet := c.GetRolloutStage(ctx, getB)
		wantCode(t, errGet, codes.NotFound, "NOT_FOUND")
		_, errSet := c.SetRolloutStage(ctx, setB)
		wantCode(t, errSet, codes.NotFound, "NOT_FOUND")
		if !refusalOf(t, errGet).equal(missing[name][0]) || !refusalOf(t, errSet).equal(missing[name][1]) {
			t.Fatalf("%s: another tenant's class (%v, %v) differs from a missing one %v", name, errGet, errSet, missing[name])
		}
		for _, tenantFilter := range []string{"", tenantB} {
			list, err := c.ListRolloutStages(ctx, &registryv1.ListRolloutStagesRequest{TenantId: tenantFilter})
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range list.GetRolloutStages() {
				if st.GetTenantId() != tenant {
					t.Fatalf("%s lists %v of another tenant (filter %q)", name, st, tenantFilter)
				}
			}
		}
	}
	_, err := reader.SetRolloutStage(ctx, stageReq(canary, "let me in"))
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = service.SetRolloutStage(ctx, stageReq(canary, "services read"))
	wantCode(t, err, codes.PermissionDenied, "")
	if resp := setStage(t, owner, stageReq(canary, "owner opens the canary")); resp.GetRolloutStage().GetChangedBy() != "lee" {
		t.Fatalf("owner's change: %v", resp)
	}
	got, err := service.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: privateClassB})
	if err != nil || got.GetRolloutStage().GetStage() != shadow {
		t.Fatalf("service reads tenant-b's stage: %v, %v", got, err)
	}

	// The admin's list has both tenants' pairs, in class order.
	list, err := admin.ListRolloutStages(ctx, &registryv1.ListRolloutStagesRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	next, err := admin.ListRolloutStages(ctx, &registryv1.ListRolloutStagesRequest{PageSize: 1, PageToken: list.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range append(list.GetRolloutStages(), next.GetRolloutStages()...) {
		names = append(names, st.GetAudienceClass()+"/"+st.GetServerId()+"="+st.GetStage().String())
	}
	if want := []string{class + "/" + server + "=STAGE_CANARY", privateClassB + "/" + server + "=STAGE_SHADOW"}; !slices.Equal(names, want) || next.GetNextPageToken() != "" {
		t.Fatalf("admin pages %v (next %q), want %v", names, next.GetNextPageToken(), want)
	}

	// Unknown server or class: NOT_FOUND.
	_, err = admin.SetRolloutStage(ctx, &registryv1.SetRolloutStageRequest{ServerId: "nope", AudienceClass: class, Stage: full, Reason: "x"})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
	_, err = admin.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: "tenant-a.nothing"})
	wantCode(t, err, codes.NotFound, "NOT_FOUND")
}

// Bad input is refused whole with one field violation per problem, and
// nothing is written: the epoch does not move.
func TestRolloutStageRefusesBadInput(t *testing.T) {
	_, ctx, admin := startFixture(t)
	before := epochOf(t, admin, tenant)
	for name, tc := range map[string]struct {
		req    *registryv1.SetRolloutStageRequest
		fields []string
	}{
		"no reason":          {stageReq(shadow, ""), []string{"reason"}},
		"blank reason":       {stageReq(shadow, "  \t"), []string{"reason"}},
		"no stage":           {stageReq(registryv1.Stage_STAGE_UNSPECIFIED, "x"), []string{"stage"}},
		"unknown stage":      {stageReq(registryv1.Stage(9), "x"), []string{"stage"}},
		"percent above 100":  {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: canary, CanaryPercent: proto.Int32(101), Reason: "x"}, []string{"canary_percent"}},
		"negative percent":   {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: canary, CanaryPercent: proto.Int32(-1), Reason: "x"}, []string{"canary_percent"}},
		"unknown effect":     {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: canary, CanaryEffects: []catalogv1.EffectClass{readOnly, 42}, Reason: "x"}, []string{"canary_effects[1]"}},
		"unspecified effect": {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: canary, CanaryEffects: []catalogv1.EffectClass{0}, Reason: "x"}, []string{"canary_effects[0]"}},
		"percent on full":    {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: full, CanaryPercent: proto.Int32(5), Reason: "x"}, []string{"canary_percent"}},
		"effects on shadow":  {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: shadow, CanaryEffects: []catalogv1.EffectClass{readOnly}, Reason: "x"}, []string{"canary_effects"}},
		"bad names":          {&registryv1.SetRolloutStageRequest{ServerId: "Bad Id", AudienceClass: "noclass", Stage: shadow, Reason: "x"}, []string{"audience_class", "server_id"}},
		"everything wrong":   {&registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: class, Stage: canary, CanaryPercent: proto.Int32(200), CanaryEffects: []catalogv1.EffectClass{7}, ExpectedVersion: -1}, []string{"canary_effects[0]", "canary_percent", "expected_version", "reason"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := admin.SetRolloutStage(ctx, tc.req)
			wantFields(t, err, tc.fields...)
		})
	}
	if e := epochOf(t, admin, tenant); e != before {
		t.Fatalf("epoch moved from %d to %d on refused requests", before, e)
	}
	// 0 and 100 are percentages.
	for _, pct := range []int32{0, 100} {
		req := stageReq(canary, "edge")
		req.CanaryPercent = proto.Int32(pct)
		if resp := setStage(t, admin, req); resp.GetRolloutStage().GetCanaryPercent() != pct {
			t.Fatalf("percent %d stored as %v", pct, resp.GetRolloutStage())
		}
	}
}

// Deleting a server ends its stages without rewriting the past: the
// policy at an epoch before the deletion still shows the stage in force.
func TestRolloutStageSurvivesServerDeletionInHistory(t *testing.T) {
	_, ctx, admin := startFixture(t)
	resp := setStage(t, admin, stageReq(shadow, "try it"))
	srv, err := admin.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{ExpectedVersion: 1,
		AudienceClass: &registryv1.AudienceClass{Name: class, TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: server, ExpectedVersion: srv.GetServer().GetVersion()}); err != nil {
		t.Fatal(err)
	}
	if st := policyStage(t, admin, resp.GetPolicyEpoch()); st.GetStage() != shadow {
		t.Fatalf("stage at epoch %d after the server was deleted: %v", resp.GetPolicyEpoch(), st)
	}
	list, err := admin.ListRolloutStages(ctx, &registryv1.ListRolloutStagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetRolloutStages()) != 0 {
		t.Fatalf("stages left after deleting the only server: %v", list.GetRolloutStages())
	}
	// Registered again, the server starts from the default, and the first
	// change is version 1 again.
	if _, err := admin.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()}); err != nil {
		t.Fatal(err)
	}
	if r := setStage(t, admin, stageReq(canary, "second life")); r.GetRolloutStage().GetVersion() != 1 {
		t.Fatalf("after re-registration: %v", r)
	}
}

// Concurrent stage changes of one tenant queue on the tenant row: each gets
// its own epoch and version, none is lost, and the history's epoch ranges
// follow each other without a gap or an overlap.
func TestRolloutStageConcurrentChanges(t *testing.T) {
	_, ctx, admin := startFixture(t)
	before := epochOf(t, admin, tenant)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := stageReq(canary, "concurrent")
			req.CanaryPercent = proto.Int32(int32(10 + i))
			_, err := admin.SetRolloutStage(ctx, req)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if e := epochOf(t, admin, tenant); e != before+n {
		t.Fatalf("epoch %d after %d concurrent changes from %d", e, n, before)
	}
	got, err := admin.GetRolloutStage(ctx, &registryv1.GetRolloutStageRequest{ServerId: server, AudienceClass: class, IncludeHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for i, h := range got.GetHistory() {
		if h.GetVersion() != int64(i)+1 || h.GetPolicyEpoch() != before+int64(i)+1 || seen[h.GetCanaryPercent()] {
			t.Fatalf("history[%d] = %v (all: %v)", i, h, got.GetHistory())
		}
		seen[h.GetCanaryPercent()] = true
		if st := policyStage(t, admin, h.GetPolicyEpoch()); !proto.Equal(st, h) {
			t.Fatalf("policy at epoch %d: %v, history says %v", h.GetPolicyEpoch(), st, h)
		}
	}
	if len(got.GetHistory()) != n {
		t.Fatalf("%d history entries, want %d", len(got.GetHistory()), n)
	}
}

// A stage set before the class covers the server is not part of the policy
// until the class covers it, and then is, from the epoch of that change:
// a server can join a class straight into SHADOW.
func TestRolloutStageBeforeTheClassCoversTheServer(t *testing.T) {
	_, ctx, admin := startFixture(t)
	const later = "tenant-a.later"
	if _, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{Name: later, TenantId: tenant}}); err != nil {
		t.Fatal(err)
	}
	set := setStage(t, admin, &registryv1.SetRolloutStageRequest{ServerId: server, AudienceClass: later, Stage: shadow, Reason: "before it joins"})
	stagesOf := func(epoch int64) []string {
		resp, err := admin.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: tenant, AtEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range resp.GetPolicy().GetRolloutStages() {
			out = append(out, st.GetAudienceClass()+"/"+st.GetServerId()+"="+st.GetStage().String())
		}
		return out
	}
	if got, want := stagesOf(0), []string{class + "/" + server + "=STAGE_FULL"}; !slices.Equal(got, want) {
		t.Fatalf("policy before the class covers the server: %v, want %v", got, want)
	}
	joined, err := admin.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{ExpectedVersion: 1, AudienceClass: &registryv1.AudienceClass{
		Name: later, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: server}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{later + "/" + server + "=STAGE_SHADOW", class + "/" + server + "=STAGE_FULL"}
	for _, e := range []int64{0, joined.GetPolicyEpoch()} {
		if got := stagesOf(e); !slices.Equal(got, want) {
			t.Fatalf("policy at epoch %d after the class covers the server: %v, want %v", e, got, want)
		}
	}
	if got := stagesOf(set.GetPolicyEpoch()); slices.Contains(got, later+"/"+server+"=STAGE_SHADOW") {
		t.Fatalf("policy at epoch %d, before the class covered the server: %v", set.GetPolicyEpoch(), got)
	}
}
