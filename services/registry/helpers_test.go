package registry_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/services/registry/registrytest"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// The fixture every review test starts from: the seed article's logistics
// team owns server `logistics`; tenant-a reads it as tenant-a.readers.
const (
	server = "logistics"
	owners = "logistics-platform"
	tenant = "tenant-a"
	class  = "tenant-a.readers"
	toolID = "logistics.shipment_status"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func logisticsServer() *registryv1.Server {
	return &registryv1.Server{
		ServerId: server, DisplayName: "Logistics", Owner: tenant + "/group:" + owners,
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "https://logistics.example.test/mcp"}},
		TrustLevel:     registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		ScanInterval:   durationpb.New(5 * time.Minute),
	}
}

// setup registers the fixture's server, tenant and audience class.
func setup(t *testing.T, r *registrytest.Registry) {
	t.Helper()
	ctx := ctxT(t)
	c := r.Admin(t)
	if _, err := c.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: logisticsServer()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: tenant, DisplayName: "Tenant A"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: &registryv1.AudienceClass{
		Name: class, TenantId: tenant, Servers: []*registryv1.AudienceServer{{ServerId: server, SecretRef: "env:LOGISTICS_TOKEN"}},
	}}); err != nil {
		t.Fatal(err)
	}
}

// startFixture starts a registry without discovery, with the fixture's
// server, tenant and class, and returns a context and an admin client.
func startFixture(t *testing.T) (*registrytest.Registry, context.Context, registryv1.RegistryServiceClient) {
	t.Helper()
	r := registrytest.Start(t, registrytest.Options{NoDiscovery: true})
	setup(t, r)
	return r, ctxT(t), r.Admin(t)
}

// startWithTool starts a registry following the fake discovery, with the
// fixture set up and shipment_status discovered with description.
func startWithTool(t *testing.T, description string) (*registrytest.Registry, context.Context, registryv1.RegistryServiceClient) {
	t.Helper()
	r := registrytest.Start(t, registrytest.Options{})
	setup(t, r)
	discover(t, r, shipmentStatus(description))
	return r, ctxT(t), r.Admin(t)
}

// shipmentStatus is the seed's tool at a given description; its
// outputSchema requires shipment_id, status and updated_at.
func shipmentStatus(description string) *catalogv1.ToolDescriptor {
	return registrytest.Tool(server, "shipment_status", description, "shipment_id", "status", "updated_at")
}

// discover commits tools to the fake discovery and waits until the registry
// records the first one with its digest.
func discover(t *testing.T, r *registrytest.Registry, tools ...*catalogv1.ToolDescriptor) *registryv1.Tool {
	t.Helper()
	r.Discovery.Commit(server, class, tools...)
	want := tools[0]
	return r.WaitTool(t, want.GetToolId(), func(tool *registryv1.Tool) bool {
		return tool.GetDescriptorDigest() == want.GetDescriptorDigest()
	})
}

func contractFor(id string) *registryv1.ToolContract {
	return &registryv1.ToolContract{
		ToolId:            id,
		Effect:            catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY,
		Scope:             "shipment:read",
		Authorization:     registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT,
		DeadlineMs:        2000,
		DownstreamMapping: &registryv1.DownstreamMapping{Destination: "shipments-api", Operation: "GET /shipments/{id}"},
		AllowedFields:     []string{"shipment_id", "status", "updated_at"},
		RequiredEvidence:  []string{"shipment_id", "updated_at"},
	}
}

// wantCode fails unless err has the gRPC code and, when reason is set, the
// ErrorInfo reason.
func wantCode(t *testing.T, err error, code codes.Code, reason string) *status.Status {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("got %v (%v), want %v", st.Code(), err, code)
	}
	if reason != "" {
		got := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				got = info.GetReason()
			}
		}
		if got != reason {
			t.Fatalf("reason %q (%v), want %q", got, err, reason)
		}
	}
	return st
}

type violation struct{ field, description string }

// violations returns the BadRequest field violations of err.
func violations(err error) []violation {
	var out []violation
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, violation{v.GetField(), v.GetDescription()})
			}
		}
	}
	return out
}

func fields(vs []violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.field)
	}
	return out
}

func wantFields(t *testing.T, err error, want ...string) []violation {
	t.Helper()
	wantCode(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	vs := violations(err)
	if got := fields(vs); !slices.Equal(got, want) {
		t.Fatalf("violations on %q, want %q (%v)", got, want, vs)
	}
	return vs
}

func epochOf(t *testing.T, c registryv1.RegistryServiceClient, tenantID string) int64 {
	t.Helper()
	resp, err := c.GetPolicy(ctxT(t), &registryv1.GetPolicyRequest{TenantId: tenantID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPolicy().GetPolicyEpoch()
}

func getTool(t *testing.T, c registryv1.RegistryServiceClient, id string) (*registryv1.Tool, []*registryv1.ToolEvent) {
	t.Helper()
	resp, err := c.GetTool(ctxT(t), &registryv1.GetToolRequest{ToolId: id, IncludeHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetTool(), resp.GetHistory()
}

func kinds(events []*registryv1.ToolEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.GetKind())
	}
	return out
}
