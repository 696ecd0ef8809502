package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestAMalformedTenantClaimIsUnauthenticatedEverywhere (issue 20, point
// 5): a token signed by the suite's identity provider, current, for a
// subject in the readers group, whose `tenant` claim is no tenant id, is
// UNAUTHENTICATED INVALID_TOKEN (ErrorInfo metadata claim=tenant, a
// message naming the claim and never its value) at the registry,
// discovery, admission (ListVisibleTools, the RPC behind `visible`, and
// Check) and the lease service, and HTTP 401 with `WWW-Authenticate:
// Bearer error="invalid_token"` naming the claim at the gateway, for
// tools/list and tools/call alike; it was UNAVAILABLE "retry shortly"
// (the registry refused the tenant id as a malformed request). The same
// subject with a good tenant claim lists and calls as before.
func TestAMalformedTenantClaimIsUnauthenticatedEverywhere(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	ctx := ctxFor(t)
	const claim = "Tenant-A"
	bad := w.St.Auth.Token(t, principal.Claims{Subject: "alice", Tenant: claim, Groups: []string{"readers"}})

	grpcCalls := map[string]func() error{
		"registry ListServers": func() error {
			_, err := registryv1.NewRegistryServiceClient(servicetest.Dial(t, w.St.RegistryAddr, bad)).ListServers(ctx, &registryv1.ListServersRequest{})
			return err
		},
		"discovery ListRuns": func() error {
			_, err := discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, w.St.DiscoveryAddr, bad)).ListRuns(ctx, &discoveryv1.ListRunsRequest{})
			return err
		},
		"admission ListVisibleTools": func() error {
			_, err := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, bad)).ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{})
			return err
		},
		"admission Check": func() error {
			_, err := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, bad)).Check(ctx,
				&admissionv1.CheckRequest{ToolId: gatewayworld.ServerID + ".shipment_status", AudienceClass: gatewayworld.ClassA,
					Arguments: []byte(`{"shipment_id":"S-1"}`), Mode: admissionv1.Mode_MODE_AUTONOMOUS})
			return err
		},
		"lease Issue": func() error {
			_, err := leasev1.NewLeaseServiceClient(servicetest.Dial(t, w.LeaseAddr, bad)).Issue(ctx,
				&leasev1.IssueRequest{ReceiptId: "00000000-0000-4000-8000-000000000000", Audience: "executor.inventory"})
			return err
		},
	}
	for name, call := range grpcCalls {
		err := call()
		st := status.Convert(err)
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if st.Code() != codes.Unauthenticated || info.GetReason() != principal.ReasonInvalidToken || info.GetMetadata()["claim"] != "tenant" {
			t.Errorf("%s: %v %v; want UNAUTHENTICATED %s with claim=tenant", name, st.Code(), info, principal.ReasonInvalidToken)
			continue
		}
		if !strings.Contains(st.Message(), "`tenant` claim") || strings.Contains(st.Message(), claim) {
			t.Errorf("%s: message %q must name the claim, never its value", name, st.Message())
		}
	}

	for name, body := range map[string]string{
		"tools/list": `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"tools/call": `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shipment_status","arguments":{"shipment_id":"S-1"}}}`,
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.GatewayURL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := gatewayworld.HTTPClient(bad).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(ch, `Bearer error="invalid_token"`) ||
			!strings.Contains(ch, "`tenant` claim") || strings.Contains(ch, claim) || !strings.Contains(ch, "resource_metadata=") {
			t.Errorf("gateway %s: %d %q; want 401 with an invalid_token challenge naming the claim", name, resp.StatusCode, ch)
		}
	}

	cs := gatewayworld.Connect(t, w.GatewayURL, w.Token(t, "alice", gatewayworld.TenantA), nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shipment_status", Arguments: map[string]any{"shipment_id": "S-1"}})
	if err != nil || res.IsError {
		t.Fatalf("the same subject with a good tenant claim: %v %v", err, res)
	}
}
