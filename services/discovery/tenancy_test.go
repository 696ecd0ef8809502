package discovery_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// seen is what a client observes of an answer: an error's code, message and
// decoded details, or a response message.
type seen struct {
	code    codes.Code
	message string
	details []proto.Message
	resp    proto.Message
}

func observe(t *testing.T, resp proto.Message, err error) seen {
	t.Helper()
	if err == nil {
		return seen{resp: resp}
	}
	st := status.Convert(err)
	s := seen{code: st.Code(), message: st.Message()}
	for _, d := range st.Details() {
		m, ok := d.(proto.Message)
		if !ok {
			t.Fatalf("undecodable detail %v", d)
		}
		s.details = append(s.details, m)
	}
	return s
}

func (s seen) equal(o seen) bool {
	return s.code == o.code && s.message == o.message && slices.EqualFunc(s.details, o.details, proto.Equal) &&
		(s.resp == nil) == (o.resp == nil) && (s.resp == nil || proto.Equal(s.resp, o.resp))
}

// A principal of another tenant learns nothing of tenant-a's runs,
// snapshots, generations and active pointer through the real discovery API:
// every answer is the same, field for field, before tenant-a's scan made
// them exist and after (NOT_FOUND for single reads, an empty list for
// lists), and a run is answered as a run id that was never used. Holding
// the platform's admin or service group in another tenant, or in no tenant,
// changes nothing; neither can such a token trigger, bind or roll back.
func TestAnotherTenantSeesNothingOfTenantA(t *testing.T) {
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	ctx := ctxT(t)
	strangers := map[string]discoveryv1.DiscoveryServiceClient{
		"tenant-b user":                 e.client(e.auth.User(t, "bob", "tenant-b", "readers")),
		"tenant-b with platform groups": e.client(e.auth.User(t, "bob", "tenant-b", servicetest.AdminGroup, servicetest.ServiceGroup)),
		"no tenant, platform groups":    e.client(e.auth.User(t, "bob", "", servicetest.AdminGroup, servicetest.ServiceGroup)),
	}
	probe := func(c discoveryv1.DiscoveryServiceClient) []seen {
		var out []seen
		r1, err := c.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: "inventory", AudienceClass: class})
		out = append(out, observe(t, r1, err))
		r2, err := c.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: "inventory", AudienceClass: class, Generation: 1})
		out = append(out, observe(t, r2, err))
		r3, err := c.ListGenerations(ctx, &discoveryv1.ListGenerationsRequest{ServerId: "inventory", AudienceClass: class})
		out = append(out, observe(t, r3, err))
		r4, err := c.ListRuns(ctx, &discoveryv1.ListRunsRequest{})
		out = append(out, observe(t, r4, err))
		r5, err := c.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: "inventory", AudienceClass: class})
		out = append(out, observe(t, r5, err))
		return out
	}
	before := map[string][]seen{}
	for name, c := range strangers {
		before[name] = probe(c)
	}
	run := e.scanAndWait("inventory", class)
	if got := e.active("inventory", class); got.GetPointer().GetGeneration() != 1 {
		t.Fatalf("tenant-a's scan did not activate: %v", got)
	}
	const neverUsed = "00000000-0000-4000-8000-000000000000"
	for name, c := range strangers {
		t.Run(name, func(t *testing.T) {
			after := probe(c)
			for i := range after {
				if !after[i].equal(before[name][i]) {
					t.Fatalf("answer %d differs once tenant-a's data exists:\nbefore %+v\nafter  %+v", i, before[name][i], after[i])
				}
			}
			if after[0].code != codes.NotFound || after[1].code != codes.NotFound {
				t.Fatalf("single reads: %v %v, want NOT_FOUND", after[0].code, after[1].code)
			}
			_, err := c.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: run.GetRunId()})
			got := observe(t, nil, err)
			_, err = c.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: neverUsed})
			missing := observe(t, nil, err)
			if got.code != codes.NotFound || !sameModuloID(got, missing, run.GetRunId(), neverUsed) {
				t.Fatalf("tenant-a's run is answered unlike a missing one:\n%+v\n%+v", got, missing)
			}
			_, err = c.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory"})
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("triggered a scan: %v", err)
			}
			_, err = c.BindGeneration(ctx, &discoveryv1.BindGenerationRequest{ServerId: "inventory", AudienceClass: class, Generation: 1,
				RunId: "agent-1", BoundUntil: timestamppb.New(time.Now().Add(time.Hour))})
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("bound a generation: %v", err)
			}
			_, err = c.Rollback(ctx, &discoveryv1.RollbackRequest{ServerId: "inventory", AudienceClass: class, ExpectedGeneration: 1})
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("rolled back: %v", err)
			}
			// Watch from the start: heartbeats only, no pointer change of
			// tenant-a.
			// A principal with no tenant gets no stream at all.
			stream, err := c.Watch(ctx, &discoveryv1.WatchRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for beats := 0; beats < 2; {
				msg, err := stream.Recv()
				if strings.HasPrefix(name, "no tenant") {
					if status.Code(err) != codes.PermissionDenied {
						t.Fatalf("a principal with no tenant watched: %v, %v", msg, err)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if ch := msg.GetChange(); ch != nil {
					t.Fatalf("watched tenant-a's change %v", ch)
				}
				beats++
			}
		})
	}
	// Tenant-a's own principal, even without any group, reads them; a
	// tenant-a token carrying the service group still cannot trigger.
	alice := e.client(e.auth.User(t, "alice", tenant))
	if _, err := alice.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: run.GetRunId()}); err != nil {
		t.Fatalf("own run: %v", err)
	}
	fakeService := e.client(e.auth.User(t, "mallory", tenant, servicetest.ServiceGroup, servicetest.AdminGroup))
	if _, err := fakeService.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a tenant-a token with the service group triggered a scan: %v", err)
	}
}

// sameModuloID reports whether two refusals are the same once the id each
// names (in the message and in ErrorInfo metadata) is replaced by a
// placeholder.
func sameModuloID(a, b seen, idA, idB string) bool {
	norm := func(s seen, id string) seen {
		out := seen{code: s.code, message: strings.ReplaceAll(s.message, id, "ID")}
		for _, d := range s.details {
			c := proto.Clone(d)
			if info, ok := c.(*errdetails.ErrorInfo); ok {
				for k, v := range info.Metadata {
					info.Metadata[k] = strings.ReplaceAll(v, id, "ID")
				}
			}
			out.details = append(out.details, c)
		}
		return out
	}
	return norm(a, idA).equal(norm(b, idB))
}

// A run is seen by its tenant's users while it is still running, in
// DISCOVERING with the class's tenant and policy epoch (its row carries
// them from its start; no later update makes it visible), and by no user of
// another tenant. What the run learns while connecting (protocol version,
// identity and trust digests) is written with its end.
func TestARunningRunIsSeenByItsTenantOnly(t *testing.T) {
	e := start(t, nil)
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	srv := discoverytest.NewHTTP(t, discoverytest.ListerFunc(func(call int, cursor *string) discoverytest.Reply {
		r := cat.List(call, cursor)
		r.Wait = hold
		return r
	}), discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	epoch := e.reg.BumpEpoch(tenant)
	ctx := ctxT(t)
	alice := e.client(e.auth.User(t, "alice", tenant))
	bob := e.client(e.auth.User(t, "bob", "tenant-b"))
	ticket := e.scan("inventory", class)

	var running *discoveryv1.Run
	for running == nil {
		resp, err := alice.ListRuns(ctx, &discoveryv1.ListRunsRequest{ScanId: ticket.GetScanId()})
		if err != nil {
			t.Fatal(err)
		}
		if runs := resp.GetRuns(); len(runs) > 0 {
			running = runs[0]
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("tenant-a's user never saw the running run")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if running.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING || running.GetFinishedAt() != nil ||
		running.GetTenantId() != tenant || running.GetPolicyEpoch() != epoch {
		t.Fatalf("the running run as its tenant sees it: %v", running)
	}
	got, err := alice.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: running.GetRunId()})
	if err != nil || got.GetRun().GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING {
		t.Fatalf("GetRun of the running run by its tenant: %v, %v", got, err)
	}
	if resp, err := bob.ListRuns(ctx, &discoveryv1.ListRunsRequest{}); err != nil || len(resp.GetRuns()) != 0 {
		t.Fatalf("another tenant's user listed %v, %v", resp, err)
	}
	if _, err := bob.GetRun(ctx, &discoveryv1.GetRunRequest{RunId: running.GetRunId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("another tenant's user read the running run: %v", err)
	}
	release()
	end := e.wait(ticket.GetScanId(), nil)
	want(t, end, eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)
	if end.GetRunId() != running.GetRunId() || end.GetTenantId() != tenant || end.GetPolicyEpoch() != epoch ||
		end.GetProtocolVersion() == "" || end.GetIdentityDigest() == "" || end.GetTrustConfigDigest() == "" {
		t.Fatalf("the run's end: %v", end)
	}
}
