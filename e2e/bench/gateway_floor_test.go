package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/toolcrib/toolcrib/e2e/gatewayworld"
)

// floorProxy is the gateway's floor in bench-gateway: an MCP server (the
// go-sdk's streamable handler, stateless, as the gateway serves a client
// of 2026-07-28: each request its own short-lived server session) whose one tool does,
// per call, only what the rules make every gateway call do, against the
// same services and upstream as the gateway in the same run, and nothing
// else:
//
//   - the Check: one gRPC round trip to admission (its health RPC, through
//     the same transport and interceptors with the caller's token) and
//     one Ed25519 signature of a receipt's size (every ALLOW is signed);
//   - the Issue: one gRPC round trip to the lease service (its health
//     RPC), one Ed25519 verification (the signed receipt), one signature
//     (the lease) and one row durably committed through a group commit
//     like the lease store's, into a table with a unique receipt id (the
//     receipt's single use);
//   - the holder proof: one Ed25519 signature;
//   - the upstream call: the go-sdk client's tools/call to the same
//     upstream, the result passed back as it came.
//
// No visible-set lookup, argument validation, descriptor pinning, result
// policy or metrics: the gap between the gateway and this floor is what
// those and the gateway's own code cost.
type floorProxy struct {
	URL string

	admission, lease healthpb.HealthClient
	upstream         *mcp.ClientSession
	commit           func(context.Context) error
	priv             ed25519.PrivateKey
	pub              ed25519.PublicKey
	receipt, leased  []byte
	proof            []byte
	receiptSig       []byte
	// check and issue sum the floor's Check and Issue steps (ns), over
	// calls calls.
	check, issue, calls atomic.Int64
}

// reset forgets the steps timed so far (the warm-up's).
func (f *floorProxy) reset() { f.check.Store(0); f.issue.Store(0); f.calls.Store(0) }

// steps are the floor's mean Check and Issue steps in ms.
func (f *floorProxy) steps() (check, issue float64) {
	n := float64(f.calls.Load())
	return float64(f.check.Load()) / 1e6 / n, float64(f.issue.Load()) / 1e6 / n
}

func startFloorProxy(t *testing.T, w *gatewayworld.World, token string, commit func(context.Context) error) *floorProxy {
	t.Helper()
	ctx := context.Background()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &floorProxy{
		admission: healthpb.NewHealthClient(w.St.Auth.Dial(t, w.AdmissionAddr, token)),
		lease:     healthpb.NewHealthClient(w.St.Auth.Dial(t, w.LeaseAddr, token)),
		commit:    commit, priv: priv, pub: pub,
		receipt: make([]byte, floorReceiptBytes), leased: make([]byte, floorLeaseBytes), proof: make([]byte, floorProofBytes),
	}
	for _, b := range [][]byte{f.receipt, f.leased, f.proof} {
		_, _ = rand.Read(b)
	}
	f.receiptSig = ed25519.Sign(priv, f.receipt)
	client := mcp.NewClient(&mcp.Implementation{Name: "floor-proxy", Version: "1.0.0"}, nil)
	f.upstream, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.UpstreamURL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.upstream.Close() })

	server := mcp.NewServer(&mcp.Implementation{Name: "floor-proxy", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}}, f.call)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: labelHandler(floorLabel, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	f.URL = "http://" + ln.Addr().String()
	return f
}

// floorLabel is the pprof label value of the floor proxy's work.
const floorLabel = "gateway-floor"

var errFloorRefused = errors.New("floor: a step the floor makes failed")

func (f *floorProxy) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	// Check.
	if _, err := f.admission.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		return nil, err
	}
	_ = ed25519.Sign(f.priv, f.receipt)
	checked := time.Now()
	// Issue.
	if _, err := f.lease.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		return nil, err
	}
	if !ed25519.Verify(f.pub, f.receipt, f.receiptSig) {
		return nil, errFloorRefused
	}
	_ = ed25519.Sign(f.priv, f.leased)
	if err := f.commit(ctx); err != nil {
		return nil, err
	}
	issued := time.Now()
	f.check.Add(int64(checked.Sub(start)))
	f.issue.Add(int64(issued.Sub(checked)))
	f.calls.Add(1)
	// The holder proof, then the upstream.
	_ = ed25519.Sign(f.priv, f.proof)
	return f.upstream.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
}
