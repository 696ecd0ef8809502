package discovery_test

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

const (
	tenant = "tenant-a"
	class  = "tenant-a.readers"
	secret = "upstream-s3cr3t-value"
	envRef = "DISCOVERY_TEST_UPSTREAM"
)

const (
	eligible    = catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
	proven      = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
	unversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	incomplete  = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
	quarantined = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED
)

// TestMain doubles as a discovery worker process for the kill test
// (discoverytest.StartChild).
func TestMain(m *testing.M) {
	if discoverytest.RunChild() {
		return
	}
	code := m.Run()
	discoverytest.Cleanup()
	os.Exit(code)
}

// env is one discovery service under test with its fake registry.
type env struct {
	t      *testing.T
	auth   *servicetest.Auth
	reg    *regFake
	url    string
	addr   string
	admin  discoveryv1.DiscoveryServiceClient
	cfg    discovery.Config
	cancel context.CancelFunc
}

// start runs discovery in-process (its real Run) against a fresh database
// and a fake registry on loopback gRPC. mod adjusts the configuration.
func start(t *testing.T, mod func(*discovery.Config)) *env {
	t.Helper()
	auth := servicetest.NewAuth(t)
	return startOn(t, auth, pgtest.NewDatabase(t, pgtest.Schema{Name: "discovery", Sets: discovery.Spec().Migrations}), newRegFake(t, auth), mod)
}

// startOn runs discovery on an existing database and fake registry (a
// second worker set shares both).
func startOn(t *testing.T, auth *servicetest.Auth, url string, reg *regFake, mod func(*discovery.Config)) *env {
	t.Helper()
	e := &env{t: t, auth: auth, url: url, reg: reg}
	cfg, err := discovery.ParseConfig(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Common = e.auth.Common(t, e.url, false, nil)
	cfg.RegistryAddr = e.reg.addr
	cfg.AdmissionAddr = "" // no admission here; the rollout guard acts on incidents only
	cfg.NoAutoScans = true
	cfg.Workers = 4
	cfg.RetryBase, cfg.RetryMax = 100*time.Millisecond, time.Second
	cfg.Linger = 500 * time.Millisecond
	cfg.WatchHeartbeat = 200 * time.Millisecond
	// The MCP fixtures listen on loopback; the upstream secret is envRef.
	cfg.Egress.AllowLoopback = true
	cfg.Secrets.EnvPrefixes = envRef + ",UNSET_"
	cfg.LookupEnv = func(k string) (string, bool) {
		if k == envRef {
			return secret, true
		}
		return "", false
	}
	if mod != nil {
		mod(&cfg)
	}
	e.cfg = cfg
	drainCtx, drain := context.WithCancel(context.Background())
	t.Cleanup(drain)
	e.cancel = drain // starts the shutdown; the cleanup waits for Run
	e.addr = servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
		c := cfg
		c.Listening = listening
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-drainCtx.Done():
				stop()
			case <-ctx.Done():
			}
		}()
		return discovery.Run(ctx, c)
	})
	e.admin = discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(t, e.addr, e.auth.Admin(t)))
	return e
}

// client returns a client presenting token.
func (e *env) client(token string) discoveryv1.DiscoveryServiceClient {
	return discoveryv1.NewDiscoveryServiceClient(servicetest.Dial(e.t, e.addr, token))
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// register adds an HTTP server and binds it to the class.
func (e *env) register(id, url string, src registryv1.RevisionSource, pin string) *registryv1.Server {
	e.reg.AddTenant(tenant)
	s := e.reg.PutServer(&registryv1.Server{ServerId: id, Owner: "team", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: src, IdentityPin: pin, ScanInterval: durationpb.New(time.Hour),
		Transport: &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}}})
	e.bind(class, id, "env:"+envRef)
	return s
}

// bind adds (or replaces) a server binding of a class.
func (e *env) bind(className, server, ref string) {
	c := &registryv1.AudienceClass{Name: className, TenantId: tenant}
	if old := e.reg.class(className); old != nil {
		c = old
	}
	found := false
	for _, b := range c.Servers {
		if b.ServerId == server {
			b.SecretRef, found = ref, true
		}
	}
	if !found {
		c.Servers = append(c.Servers, &registryv1.AudienceServer{ServerId: server, SecretRef: ref})
	}
	e.reg.PutClass(c)
}

// scan triggers a scan of (server, class) and returns its ticket.
func (e *env) scan(server, className string) *discoveryv1.ScanTicket {
	e.t.Helper()
	resp, err := e.admin.TriggerScan(ctxT(e.t), &discoveryv1.TriggerScanRequest{ServerId: server, AudienceClass: className})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetScans()[0]
}

// wait waits for a run of the scan satisfying done (nil: ended, not to be
// retried).
func (e *env) wait(scanID string, done func(*discoveryv1.Run) bool) *discoveryv1.Run {
	e.t.Helper()
	r, err := discovery.WaitScan(ctxT(e.t), e.admin, scanID, done)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// ended matches a finished run in state with reason.
func ended(state catalogv1.DiscoveryState, reason discoveryv1.RunReason) func(*discoveryv1.Run) bool {
	return func(r *discoveryv1.Run) bool {
		return discovery.Terminal(r) && r.GetState() == state && r.GetReason() == reason
	}
}

// scanAndWait triggers a scan and waits for its final run.
func (e *env) scanAndWait(server, className string) *discoveryv1.Run {
	e.t.Helper()
	return e.wait(e.scan(server, className).GetScanId(), nil)
}

func want(t *testing.T, r *discoveryv1.Run, state catalogv1.DiscoveryState, reason discoveryv1.RunReason) {
	t.Helper()
	if r.GetState() != state || r.GetReason() != reason {
		t.Fatalf("run %s attempt %d: %v %v (%s), want %v %v", r.GetRunId(), r.GetAttempt(), r.GetState(), r.GetReason(), r.GetDetail(), state, reason)
	}
}

func (e *env) active(server, className string) *discoveryv1.GetActiveSnapshotResponse {
	e.t.Helper()
	resp, err := e.admin.GetActiveSnapshot(ctxT(e.t), &discoveryv1.GetActiveSnapshotRequest{ServerId: server, AudienceClass: className})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

type regFake struct {
	*discoverytest.Registry
	addr string
}

func newRegFake(t *testing.T, auth *servicetest.Auth) *regFake {
	r, addr := discoverytest.StartRegistry(t, auth)
	return &regFake{Registry: r, addr: addr}
}

func (r *regFake) class(name string) *registryv1.AudienceClass { return r.Class(name) }
