package gateway_test

import (
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// TestGatewayNeverAsksToConfirmARefusedCall: the order of issue 25
// (… ARGUMENTS_INVALID → CONDITION_UNMET → CONFIRMATION_REQUIRED) through
// the gateway. A write tool a user holds only through a grant with a
// condition is listed; a call the condition refuses, or whose arguments
// are invalid, is answered CONDITION_UNMET or ARGUMENTS_INVALID without
// the user being asked anything and without the upstream running; a call
// the condition admits is asked once, runs once, and its receipt names
// the grant whose condition admitted it.
func TestGatewayNeverAsksToConfirmARefusedCall(t *testing.T) {
	w := gatewayworld.Start(t, gatewayworld.Options{})
	ctx := ctxFor(t)
	const grant = "group:dock-leads"
	if _, err := w.St.Registry.GrantScopes(ctx, &registryv1.GrantScopesRequest{TenantId: gatewayworld.TenantA, Group: "dock-leads",
		Scopes: []string{"shipment:write"}, AudienceClasses: []string{gatewayworld.ClassA},
		Condition: `args.shipment_id.startsWith("S-DOCK-")`}); err != nil {
		t.Fatal(err)
	}
	dee := w.St.Auth.User(t, "dee", gatewayworld.TenantA, "dock-leads")
	ask := &elicitation{accept: true}
	cs := gatewayworld.Connect(t, w.GatewayURL, dee, &mcp.ClientOptions{ElicitationHandler: ask.handle})
	servicetest.Eventually(t, 10*time.Second, "dee sees cancel_shipment", func() bool {
		names, _ := listAll(t, cs)
		return slices.Contains(names, "cancel_shipment")
	})

	for _, tc := range []struct {
		what, want string
		args       map[string]any
	}{
		{"the condition refuses", "CONDITION_UNMET", map[string]any{"shipment_id": "S-9"}},
		{"invalid arguments", "ARGUMENTS_INVALID", map[string]any{"shipment_id": 9}},
	} {
		res := call(t, cs, "cancel_shipment", tc.args)
		if !res.IsError || reason(res) != tc.want {
			t.Fatalf("%s: %v %q %q, want %s", tc.what, res.IsError, reason(res), text(res), tc.want)
		}
		if asked := ask.asked(); len(asked) != 0 {
			t.Fatalf("%s: the user was asked %q", tc.what, asked)
		}
		if n := len(callsOf(w, "cancel_shipment")); n != 0 {
			t.Fatalf("%s: the upstream ran %d calls", tc.what, n)
		}
	}

	res := call(t, cs, "cancel_shipment", map[string]any{"shipment_id": "S-DOCK-1"})
	if res.IsError || text(res) != "cancelled S-DOCK-1" {
		t.Fatalf("the call the condition admits: %q %q", reason(res), text(res))
	}
	if asked := ask.asked(); len(asked) != 1 {
		t.Fatalf("the user was asked %d times, want once: %q", len(asked), asked)
	}
	if n := len(callsOf(w, "cancel_shipment")); n != 1 {
		t.Fatalf("the upstream ran %d calls, want 1", n)
	}
	adm := admissionv1.NewAdmissionServiceClient(servicetest.Dial(t, w.AdmissionAddr, dee))
	rid, _ := res.Meta["dev.toolcrib/receipt"].(string)
	got, err := adm.GetReceipt(ctx, &admissionv1.GetReceiptRequest{ReceiptId: rid})
	if err != nil || got.GetReceipt().GetAdmittingGrant() != grant || got.GetReceipt().GetMode() != admissionv1.Mode_MODE_USER_CONFIRMED {
		t.Fatalf("receipt %q: %v %v, want admitted by %s", rid, got.GetReceipt(), err, grant)
	}
}
