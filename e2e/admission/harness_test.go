// Package admission tests the admission service whole: real registry and
// discovery services (discovery's workers scanning a fixture MCP server),
// real Postgres and Redis, and admission replicas started through their
// own Run, each reading the other services through a loopback TCP proxy the
// test can freeze.
//
// It is the admission fault suite of `make faults` (see CONTRIBUTING.md, "The
// admission fault suite"). The tests record what they counted with
// platform/faultreport: randomized rounds and agreements with the oracle
// (e2e/admissionoracle), cross-tenant hits (an ALLOW or a digest given to
// another tenant), ALLOWs after a replica's validity window, ALLOWs and
// successful Verifies more than 1 s after a revoking commit, reused or
// misdirected leases accepted, and Checks answered against receipts stored.
package admission

import (
	"context"
	neturl "net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	"github.com/toolcrib/toolcrib/e2e/stack"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/redisclient"
	"github.com/toolcrib/toolcrib/platform/redistest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	admissionsvc "github.com/toolcrib/toolcrib/services/admission"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/registry"
)

const (
	serverID = "inventory"
	tenantA  = "tenant-a"
	tenantB  = "tenant-b"
	classA   = "tenant-a.readers"
	toolID   = "inventory.shipment_status"
	scope    = "shipment:read"
	// heartbeat is the registry's and discovery's Watch heartbeat here.
	heartbeat = 100 * time.Millisecond
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// world is the running registry and discovery with one reviewed, enabled
// tool of tenant-a's class in an active generation.
type world struct {
	st         *stack.Stack
	srv        *fixture.Server
	sourceLink *servicetest.Proxy // nil unless asked for
	generation int64
	digest     string
	// digests are the descriptor digests of the first generation by tool id.
	digests map[string]string
	// redisPrefix is the L2 prefix the replicas share.
	redisPrefix string
}

// newWorld starts the stack and walks the tool to ALLOW-able: register the
// server, tenants, tenant-a's class and alice's grant; scan; publish,
// approve and enable the exact digest discovery proved.
func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, worldOptions{})
}

// worldOptions adds to the world of [newWorld].
type worldOptions struct {
	// tools are more tools of the server: each is published with its
	// scope (READ_ONLY), approved and enabled like shipment_status, and
	// alice is granted every scope.
	tools []extraTool
	// discovery edits discovery's configuration.
	discovery func(*discovery.Config)
	// sourceLink puts a proxy between discovery and the MCP server.
	sourceLink bool
}

type extraTool struct {
	name, description, scope string
	// schema is the input schema (JSON); empty: a required shipment_id.
	schema string
	// effect is the contract's effect; UNSPECIFIED publishes READ_ONLY.
	effect catalogv1.EffectClass
}

func (e extraTool) raw() fixture.Tool {
	schema := e.schema
	if schema == "" {
		schema = `{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]}`
	}
	return fixture.MustRawTool(`{"name":"` + e.name + `","description":"` + e.description + `",
"inputSchema":` + schema + `}`)
}

// newWorldWith is newWorld with more tools, discovery configuration or a
// severable link to the MCP server.
func newWorldWith(t *testing.T, o worldOptions) *world {
	t.Helper()
	ctx := ctxFor(t)
	st := stack.Start(t, stack.Options{
		Registry: func(c *registry.Config) { c.WatchHeartbeat = heartbeat },
		Discovery: func(c *discovery.Config) {
			c.Linger = 0
			c.WatchHeartbeat = heartbeat
			if o.discovery != nil {
				o.discovery(c)
			}
		},
	})
	tools := []fixture.Tool{statusTool("Query the current status of a shipment.")}
	scopes := []string{scope}
	for _, e := range o.tools {
		tools = append(tools, e.raw())
		if !slices.Contains(scopes, e.scope) {
			scopes = append(scopes, e.scope)
		}
	}
	srv, err := fixture.New(fixture.Script{Name: serverID, Versioned: true, Tools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ep, err := srv.StartHTTP(fixture.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	url := ep.URL
	var link *servicetest.Proxy
	if o.sourceLink {
		u, err := neturl.Parse(ep.URL)
		if err != nil {
			t.Fatal(err)
		}
		link = servicetest.NewProxy(t, u.Host)
		u.Host = link.Addr()
		url = u.String()
	}

	reg := st.Registry
	for _, tn := range []string{tenantA, tenantB} {
		if _, err := reg.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tn}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: &registryv1.Server{
		ServerId: serverID, Owner: tenantA + "/group:inventory-team",
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: classA, TenantId: tenantA, Servers: []*registryv1.AudienceServer{{ServerId: serverID}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantA, Subject: "alice",
		Scopes: scopes, AudienceClasses: []string{classA}}); err != nil {
		t.Fatal(err)
	}
	// tenant-b's bob holds the same scope, but no class that reads the server.
	if _, err := reg.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: tenantB, Subject: "bob",
		Scopes: []string{scope}}); err != nil {
		t.Fatal(err)
	}

	key := discovery.PointerKey{ServerID: serverID, AudienceClass: classA}
	if _, err := st.Discovery.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: serverID, AudienceClass: classA}); err != nil {
		t.Fatal(err)
	}
	if _, err := discovery.WaitPointers(ctx, st.Discovery, 0, []discovery.PointerKey{key}, nil); err != nil {
		t.Fatal(err)
	}
	active, err := st.Discovery.GetActiveSnapshot(ctx, &discoveryv1.GetActiveSnapshotRequest{ServerId: serverID, AudienceClass: classA})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{st: st, srv: srv, sourceLink: link, generation: active.GetPointer().GetGeneration(), redisPrefix: redistest.NewPrefix(t),
		digests: map[string]string{}}
	for _, d := range active.GetSnapshot().GetTools() {
		w.digests[d.GetToolId()] = d.GetDescriptorDigest()
	}
	if w.digest = w.digests[toolID]; w.digest == "" {
		t.Fatalf("the active generation has no %s", toolID)
	}
	w.reviewAndEnable(t, toolID, scope)
	for _, e := range o.tools {
		w.reviewAndEnableAs(t, serverID+"."+e.name, e.scope, e.effect)
	}
	return w
}

// reviewAndEnable waits until the registry learned the tool at the
// digest of the world's generation, then publishes a READ_ONLY contract
// with scope, approves and enables it.
func (w *world) reviewAndEnable(t *testing.T, id, scope string) {
	t.Helper()
	w.reviewAndEnableAs(t, id, scope, catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY)
}

// reviewAndEnableAs is reviewAndEnable with the contract's effect
// (UNSPECIFIED: READ_ONLY).
func (w *world) reviewAndEnableAs(t *testing.T, id, scope string, effect catalogv1.EffectClass) {
	t.Helper()
	if effect == catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
		effect = catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY
	}
	ctx := ctxFor(t)
	reg := w.st.Registry
	digest := w.digests[id]

	// The registry learns the tool from discovery (pending, disabled).
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: id})
		if err == nil && resp.GetTool().GetDescriptorDigest() == digest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry did not learn %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: id, Effect: effect, Scope: scope,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		AllowedFields: []string{"shipment_id", "status"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: id, ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: id}); err != nil {
		t.Fatal(err)
	}
}

// statusTool is the world's one tool with the given description.
func statusTool(description string) fixture.Tool {
	return fixture.MustRawTool(`{"name":"shipment_status","description":` + strconv.Quote(description) + `,
"inputSchema":{"type":"object","properties":{"shipment_id":{"type":"string"}},"required":["shipment_id"]},
"annotations":{"readOnlyHint":true}}`)
}

// l2Keys counts the decision cache's keys in the shared L2.
func (w *world) l2Keys(t *testing.T) int {
	t.Helper()
	c := redisclient.Open(redistest.Addr(), w.redisPrefix)
	defer c.Close()
	keys, err := c.Keys(context.Background(), w.redisPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// committedAt returns when the change that moved tenant to epoch
// committed, from the registry's Watch stream.
func (w *world) committedAt(t *testing.T, tenant string, epoch int64) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := w.st.Registry.Watch(ctx, &registryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := st.Recv()
		if err != nil {
			t.Fatalf("no change to epoch %d of %s in the registry's log: %v", epoch, tenant, err)
		}
		if p := msg.GetChange().GetPolicy(); p.GetTenantId() == tenant && p.GetPolicyEpoch() == epoch {
			return msg.GetChange().GetCommittedAt().AsTime()
		}
		if msg.GetHeartbeat() != nil {
			t.Fatalf("the registry's log has no change to epoch %d of %s", epoch, tenant)
		}
	}
}

// epoch returns tenant-a's current policy epoch.
func (w *world) epoch(t *testing.T) int64 {
	t.Helper()
	resp, err := w.st.Registry.GetPolicy(context.Background(), &registryv1.GetPolicyRequest{TenantId: tenantA})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPolicy().GetPolicyEpoch()
}

// replica is one running admission replica.
type replica struct {
	addr              string
	regLink, discLink *servicetest.Proxy
}

// startReplica runs an admission replica reading the registry and discovery
// through its own links, sharing the world's Redis prefix (L2), and waits
// until it is SERVING (both streams caught up).
func (w *world) startReplica(t *testing.T, window time.Duration) *replica {
	t.Helper()
	return w.startReplicaWithL2(t, window, w.redisPrefix)
}

// startReplicaWithL2 is startReplica with its own Redis prefix.
func (w *world) startReplicaWithL2(t *testing.T, window time.Duration, redisPrefix string) *replica {
	t.Helper()
	return w.startReplicaWith(t, window, redisPrefix, nil)
}

// startReplicaWith is startReplicaWithL2 with a last edit of the
// configuration (e.g. Redis or Postgres through a proxy).
func (w *world) startReplicaWith(t *testing.T, window time.Duration, redisPrefix string, edit func(*admissionsvc.Config)) *replica {
	t.Helper()
	r := &replica{regLink: servicetest.NewProxy(t, w.st.RegistryAddr), discLink: servicetest.NewProxy(t, w.st.DiscoveryAddr)}
	cfg, err := admissionsvc.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.RegistryAddr, cfg.DiscoveryAddr = r.regLink.Addr(), r.discLink.Addr()
	cfg.ValidityWindow = window
	cfg.ReceiptInterval = 10 * time.Millisecond
	if edit != nil {
		edit(&cfg)
	}
	r.addr = servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Common = w.st.Auth.Common(t, w.st.PostgresURL, true, listening)
		c.RedisPrefix = redisPrefix
		if edit != nil {
			edit(&c)
		}
		return admissionsvc.Run(ctx, c)
	})
	return r
}

// client returns an AdmissionService client of the replica presenting a
// user token of (subject, tenant).
func (w *world) client(t *testing.T, r *replica, subject, tenant string, groups ...string) admissionv1.AdmissionServiceClient {
	t.Helper()
	return admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, r.addr, w.st.Auth.User(t, subject, tenant, groups...)))
}

// confirmedClient is [world.client] whose every call also carries the
// token of a confirmer of the platform tenant (principal.ConfirmerToken):
// its MODE_USER_CONFIRMED Checks are asserted by a confirmer.
func (w *world) confirmedClient(t *testing.T, r *replica, subject, tenant string, groups ...string) admissionv1.AdmissionServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(principal.BearerToken(w.st.Auth.User(t, subject, tenant, groups...))),
		grpc.WithPerRPCCredentials(principal.ConfirmerToken(w.st.Auth.Confirmer(t))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return admissionv1.NewAdmissionServiceClient(conn)
}

// check asks for toolID at the world's generation and digest, planned at
// epoch, with valid arguments.
func (w *world) check(ctx context.Context, c admissionv1.AdmissionServiceClient, epoch int64, class string) (*admissionv1.CheckResponse, error) {
	return c.Check(ctx, &admissionv1.CheckRequest{ToolId: toolID, Generation: w.generation, DescriptorDigest: w.digest,
		PolicyEpoch: epoch, Arguments: []byte(`{"shipment_id":"s-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS, AudienceClass: class})
}
