package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	"github.com/toolcrib/toolcrib/platform/oidctest"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/gateway"
)

// TestOIDCProvider runs every service and the gateway against real OpenID
// providers found by discovery: the platform's provider (tenant in a claim)
// issues the admin, service and tenant-a tokens, tenant-b has its own
// provider mapped to it. Their tokens are accepted by each service's
// interceptor and by the gateway, the two never act for each other's
// tenants, a rotated key needs no restart, a removed key and an
// unconfigured issuer are refused everywhere, and the gateway's
// protected-resource metadata names both issuers.
func TestOIDCProvider(t *testing.T) {
	op := oidctest.Start(t, servicetest.Audience)
	tenantB := oidctest.Start(t, servicetest.Audience)
	stranger := oidctest.Start(t, servicetest.Audience)
	w := gatewayworld.Start(t, gatewayworld.Options{Auth: servicetest.NewOIDCAuth(t, op,
		principal.Issuer{URL: tenantB.Issuer, Tenant: gatewayworld.TenantB})})
	methods := map[string]string{
		w.St.RegistryAddr:  "/toolcrib.registry.v1.RegistryService/ListServers",
		w.St.DiscoveryAddr: "/toolcrib.discovery.v1.DiscoveryService/ListRuns",
		w.AdmissionAddr:    "/toolcrib.admission.v1.AdmissionService/ListVisibleTools",
		w.LeaseAddr:        "/toolcrib.lease.v1.LeaseService/Verify",
	}
	// authenticated calls one method of each service with token and returns
	// the services that refused it as unauthenticated, with the message.
	refusedBy := func(t *testing.T, token string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for addr, method := range methods {
			err := servicetest.Dial(t, addr, token).Invoke(ctxFor(t), method, &emptypb.Empty{}, &emptypb.Empty{})
			if status.Code(err) == codes.Unauthenticated {
				out[method] = status.Convert(err).Message()
			}
		}
		return out
	}
	gatewayStatus := func(t *testing.T, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, w.GatewayURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wantTools := []string{"cancel_shipment", "export_log", "ping", "shipment_status", "slow_report"}

	oldKey := op.CurrentKeyID()
	alice := w.Token(t, "alice", gatewayworld.TenantA)
	t.Run("the provider's token is accepted by every service and the gateway", func(t *testing.T) {
		if refused := refusedBy(t, alice); len(refused) != 0 {
			t.Fatalf("refused: %v", refused)
		}
		cs := gatewayworld.Connect(t, w.GatewayURL, alice, nil)
		if names, _ := listAll(t, cs); !slices.Equal(names, wantTools) {
			t.Fatalf("alice sees %v, want %v", names, wantTools)
		}
		res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: "ping"})
		if err != nil || res.IsError {
			t.Fatalf("ping: %+v, %v", res, err)
		}
	})

	t.Run("the metadata names the issuer", func(t *testing.T) {
		resp, err := http.Get(strings.TrimSuffix(w.GatewayURL, gateway.MCPPath) + gateway.MetadataPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || !slices.Equal(doc.AuthorizationServers, []string{op.Issuer, tenantB.Issuer}) {
			t.Fatalf("authorization_servers %v (%v), want [%s %s]", doc.AuthorizationServers, err, op.Issuer, tenantB.Issuer)
		}
	})

	t.Run("an unconfigured issuer is refused everywhere", func(t *testing.T) {
		forged := stranger.Token(t, "alice", map[string]any{"tenant": gatewayworld.TenantA, "groups": []string{"readers"}})
		refused := refusedBy(t, forged)
		if len(refused) != len(methods) {
			t.Fatalf("refused by %v, want all of %v", refused, methods)
		}
		for m, msg := range refused {
			if msg != "invalid token: the token's issuer is not configured" {
				t.Fatalf("%s: %q", m, msg)
			}
		}
		if got := gatewayStatus(t, forged); got != http.StatusUnauthorized {
			t.Fatalf("gateway: %d", got)
		}
	})

	t.Run("the issuers of two tenants never cross", func(t *testing.T) {
		bob := tenantB.Token(t, "bob", map[string]any{"groups": []string{"readers"}})
		if refused := refusedBy(t, bob); len(refused) != 0 {
			t.Fatalf("tenant-b's own token refused: %v", refused)
		}
		// tenant-b's readers hold no grant: bob sees none of tenant-a's tools.
		if names, _ := listAll(t, gatewayworld.Connect(t, w.GatewayURL, bob, nil)); len(names) != 0 {
			t.Fatalf("bob (tenant-b's issuer) sees %v", names)
		}
		for _, c := range []struct {
			name, token, reason string
		}{
			{"tenant-b's issuer naming tenant-a", tenantB.Token(t, "mallory", map[string]any{"tenant": gatewayworld.TenantA, "groups": []string{"readers"}}),
				"invalid token: the token's tenant claim names another tenant than its issuer's"},
			{"tenant-b's issuer naming the platform tenant", tenantB.Token(t, "mallory", map[string]any{"tenant": servicetest.PlatformTenant, "groups": []string{servicetest.AdminGroup}}),
				"invalid token: the token's tenant claim names another tenant than its issuer's"},
			{"the platform's issuer naming tenant-b", w.Token(t, "mallory", gatewayworld.TenantB),
				"invalid token: the token names a tenant mapped to another issuer"},
		} {
			refused := refusedBy(t, c.token)
			if len(refused) != len(methods) {
				t.Fatalf("%s: refused by %v, want all of %v", c.name, refused, methods)
			}
			for m, msg := range refused {
				if msg != c.reason {
					t.Fatalf("%s: %s: %q, want %q", c.name, m, msg, c.reason)
				}
			}
			if got := gatewayStatus(t, c.token); got != http.StatusUnauthorized {
				t.Fatalf("%s: gateway %d", c.name, got)
			}
		}
	})

	t.Run("a rotated key is accepted without restart, a removed key refused", func(t *testing.T) {
		op.Rotate()
		rotated := w.Token(t, "alice", gatewayworld.TenantA)
		servicetest.Eventually(t, 30*time.Second, "every service accepts the rotated key", func() bool {
			return len(refusedBy(t, rotated)) == 0 && gatewayStatus(t, rotated) == http.StatusOK
		})
		cs := gatewayworld.Connect(t, w.GatewayURL, rotated, nil)
		if names, _ := listAll(t, cs); !slices.Equal(names, wantTools) {
			t.Fatalf("alice (rotated key) sees %v", names)
		}
		op.RemoveKey(oldKey)
		servicetest.Eventually(t, 30*time.Second, "every service refuses the removed key", func() bool {
			return len(refusedBy(t, alice)) == len(methods) && gatewayStatus(t, alice) == http.StatusUnauthorized
		})
		for m, msg := range refusedBy(t, alice) {
			if msg != "invalid token: unknown key id" {
				t.Fatalf("%s: %q", m, msg)
			}
		}
	})
}
