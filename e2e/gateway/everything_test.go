package gateway_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/servicetest"
)

// startEverything runs server-everything over streamable HTTP on a
// loopback port ([servicetest.StartEverything]).
func startEverything(t *testing.T) string {
	index, _ := filepath.Abs("../ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	return servicetest.StartEverything(t, index)
}

// The names of the server-everything world.
const (
	everythingID     = "everything"
	everythingTenant = "tenant-e"
	everythingClass  = "tenant-e.hosts"
	everythingScope  = "everything:read"
	samplingTool     = "trigger-sampling-request"
)

// publishSampling publishes samplingTool's contract (READ_ONLY, sampling
// allowed or not), approves and enables it.
func publishSampling(t *testing.T, ctx context.Context, reg registryv1.RegistryServiceClient, allow bool) {
	t.Helper()
	pub, err := reg.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: &registryv1.ToolContract{
		ToolId: everythingID + "." + samplingTool, Effect: catalogv1.EffectClass_EFFECT_CLASS_READ_ONLY, Scope: everythingScope, DeadlineMs: 20000,
		Authorization: registryv1.Authorization_AUTHORIZATION_CALLER_AND_TENANT, AllowSampling: allow}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: pub.GetTool().GetToolId(), ApprovalDigest: pub.GetTool().GetApprovalDigest()}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: pub.GetTool().GetToolId()}); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayRelaysServerEverythingSampling: server-everything over
// streamable HTTP (stateful; it offers trigger-sampling-request only to
// clients that declare sampling) behind the gateway, a 2025-11-25 client
// that declared sampling. While the tool's approved contract does not
// allow sampling, the server's sampling/createMessage is refused to it and
// the client is never asked; once a contract allowing it is approved, the
// request reaches the client (named as from the server and tool) and the
// client's answer is in the tool's result; a request over
// --sampling-max-tokens (default 4096) is refused without asking the
// client.
func TestGatewayRelaysServerEverythingSampling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	upstream := startEverything(t)
	w := gatewayworld.StartServices(t)
	w.Front(t, ctx, gatewayworld.Fronted{ServerID: everythingID, URL: upstream, Tenant: everythingTenant, Class: everythingClass, Group: "hosts", Scope: everythingScope})
	reg := w.St.Registry
	servicetest.Eventually(t, 30*time.Second, "the registry learns the sampling tool", func() bool {
		_, err := reg.GetTool(ctx, &registryv1.GetToolRequest{ToolId: everythingID + "." + samplingTool})
		return err == nil
	})
	publishSampling(t, ctx, reg, false)
	w.StartGateway(t, w.AdmissionAddr, w.LeaseAddr, nil)
	host := w.St.Auth.User(t, "host", everythingTenant, "hosts")

	s := &sampler{}
	cs := gatewayworld.ConnectAt(t, w.GatewayURL, host, &mcp.ClientOptions{CreateMessageHandler: s.createMessage}, "2025-11-25")
	sample := func(maxTokens int) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: samplingTool, Arguments: map[string]any{"prompt": "Say hello.", "maxTokens": maxTokens}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Not allowed by the approved contract: refused, the client not asked.
	res := sample(100)
	if !res.IsError || !strings.Contains(text(res), "not allowed through the gateway") {
		t.Fatalf("a contract without sampling: %q", text(res))
	}
	if n := s.count(); n != 0 {
		t.Fatalf("the client was asked %d times under a contract without sampling", n)
	}

	// Allowed once a contract allowing it is approved.
	publishSampling(t, ctx, reg, true)
	servicetest.Eventually(t, 30*time.Second, "the call runs under the contract allowing sampling", func() bool {
		res = sample(100)
		return !res.IsError && s.count() > 0
	})
	if !strings.Contains(text(res), samplerAnswer) || s.count() != 1 {
		t.Fatalf("the tool's result %q after %d questions to the client", text(res), s.count())
	}
	s.mu.Lock()
	asked := s.asked[0].Params
	s.mu.Unlock()
	from, _ := asked.Meta["dev.toolcrib/relayed-from"].(map[string]any)
	if from["server"] != everythingID || from["tool"] != samplingTool || asked.MaxTokens != 100 {
		t.Fatalf("the client was asked %+v (_meta %v)", asked, asked.Meta)
	}

	// Over --sampling-max-tokens: refused, the client not asked.
	if res := sample(100000); !res.IsError || !strings.Contains(text(res), "maxTokens") {
		t.Fatalf("maxTokens over the bound: %q", text(res))
	}
	if n := s.count(); n != 1 {
		t.Fatalf("the client was asked %d times, want still 1", n)
	}
}
