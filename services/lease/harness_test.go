package lease_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/keyring"
	"github.com/toolcrib/toolcrib/platform/pgtest"
	"github.com/toolcrib/toolcrib/platform/servicetest"
	"github.com/toolcrib/toolcrib/revision/lease"
	service "github.com/toolcrib/toolcrib/services/lease"
	"github.com/toolcrib/toolcrib/services/lease/admissionview"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
)

const (
	tenant   = "acme"
	subject  = "alice"
	server   = "inventory"
	toolID   = "inventory.reserve"
	class    = "acme.readers"
	audience = "executor.inventory"
)

var argDigest, _ = lease.ArgumentDigest([]byte(`{"sku":"A-1","qty":2}`))

// receipts is the fake admission receipt lookup: exactly what the test put
// in, ErrNotFound otherwise.
type receipts struct {
	mu sync.Mutex
	m  map[string]admissionview.Decision
}

func (r *receipts) Receipt(_ context.Context, id string) (admissionview.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.m[id]
	if !ok {
		return admissionview.Decision{}, admissionview.ErrNotFound
	}
	return d, nil
}

func (r *receipts) put(id string, d admissionview.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Receipt.ReceiptId = id
	r.m[id] = d
}

// freshness is the fake Watch follower.
type freshness struct {
	mu      sync.Mutex
	verdict admissionview.Verdict
	err     error
	seen    []admissionview.Binding
}

func (f *freshness) Check(_ context.Context, b admissionview.Binding) (admissionview.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, b)
	return f.verdict, f.err
}

func (f *freshness) set(v admissionview.Verdict, err error) {
	f.mu.Lock()
	f.verdict, f.err = v, err
	f.mu.Unlock()
}

// admissionKeys is the fake admission's published receipt keys: its
// ring's key set, or an error while down; it counts the fetches.
type admissionKeys struct {
	ring    *keyring.Ring
	mu      sync.Mutex
	down    bool
	fetches int
}

func (a *admissionKeys) Fetch(context.Context) (keyring.KeySet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fetches++
	if a.down {
		return keyring.KeySet{}, fmt.Errorf("%w: admission is down (test)", admissionview.ErrUnavailable)
	}
	return a.ring.KeySet(), nil
}

func (a *admissionKeys) setDown(down bool) {
	a.mu.Lock()
	a.down = down
	a.mu.Unlock()
}

func (a *admissionKeys) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fetches
}

// suite is one lease database, Redis prefix and key file, with replicas.
type suite struct {
	auth     *servicetest.Auth
	pgURL    string
	cfg      service.Config
	receipts *receipts
	fresh    *freshness
	admKeys  *admissionKeys
	addrs    []string
}

func newSuite(t *testing.T, replicas int) *suite {
	t.Helper()
	return newSuiteWith(t, replicas, nil)
}

// newSuiteWith is newSuite with the configuration edited by edit (nil: as
// newSuite) before the replicas start.
func newSuiteWith(t *testing.T, replicas int, edit func(*service.Config)) *suite {
	t.Helper()
	ring, err := keyring.NewRing(context.Background(), &keyring.Memory{}, keyring.Options{Lifetime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{auth: servicetest.NewAuth(t), receipts: &receipts{m: map[string]admissionview.Decision{}}, fresh: &freshness{},
		admKeys: &admissionKeys{ring: ring}}
	s.pgURL = pgtest.NewDatabase(t, pgtest.Schema{Name: service.Schema, Sets: service.Migrations()})
	s.cfg = service.Config{
		Common:           s.auth.Common(t, s.pgURL, true, nil),
		KeyFile:          filepath.Join(t.TempDir(), "lease-keys.json"),
		KeyRotateEvery:   24 * time.Hour,
		KeyCheckInterval: time.Second,
		Skew:             time.Second,
		ProofWindow:      10 * time.Second,
		Issuer:           "toolcrib-lease",
		Receipts:         s.receipts,
		ReceiptKeys:      s.admKeys,
		Freshness:        s.fresh,
	}
	if edit != nil {
		edit(&s.cfg)
	}
	if err := s.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for range replicas {
		cfg := s.cfg
		s.addrs = append(s.addrs, servicetest.Start(t, func(ctx context.Context, listening func(string)) error {
			c := cfg
			c.Listening = listening
			return service.Run(ctx, c)
		}))
	}
	return s
}

func (s *suite) client(t *testing.T, replica int, token string) leasev1.LeaseServiceClient {
	return leasev1.NewLeaseServiceClient(servicetest.Dial(t, s.addrs[replica], token))
}

func (s *suite) alice(t *testing.T) leasev1.LeaseServiceClient {
	return s.client(t, 0, s.auth.User(t, subject, tenant))
}

func (s *suite) admin(t *testing.T) leasev1.LeaseServiceClient {
	return s.client(t, 0, s.auth.Admin(t))
}

// allow puts an ALLOW receipt for alice into the fake admission.
func (s *suite) allow(id string) {
	s.receipts.put(id, admissionview.Decision{
		Receipt: &admissionv1.Receipt{
			Decision: admissionv1.Decision_DECISION_ALLOW, Reason: catalogv1.DecisionReason_DECISION_REASON_ALLOW,
			TenantId: tenant, Subject: subject, ToolId: toolID, ServerId: server, AudienceClass: class,
			Generation: 5, DescriptorDigest: "sha256:" + strings.Repeat("d", 64), PolicyEpoch: 3,
			ArgumentDigest: argDigest, Mode: admissionv1.Mode_MODE_AUTONOMOUS, DecidedAt: timestamppb.Now(),
		},
		ValidUntil: time.Now().Add(20 * time.Second),
	})
}

type holder struct {
	priv ed25519.PrivateKey
	jwk  []byte
}

func newHolder(t *testing.T) holder {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return holder{priv: priv, jwk: lease.PublicJWK(pub)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// issue asks replica 0 for a lease on a fresh ALLOW receipt.
func (s *suite) issue(t *testing.T, h holder) *leasev1.IssueResponse {
	t.Helper()
	id := "rcpt-" + randomID()
	s.allow(id)
	resp, err := s.alice(t).Issue(ctxT(t), &leasev1.IssueRequest{
		ReceiptId: id, ArgumentDigest: argDigest, HolderPublicKey: h.jwk, Audience: audience,
	})
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	return resp
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claimsOf is the Go form of an Issue response's claims, for NewProof.
func claimsOf(c *leasev1.LeaseClaims) lease.Claims {
	return lease.Claims{ID: c.GetLeaseId(), ArgumentDigest: c.GetArgumentDigest(), Audience: c.GetAudience()}
}

func verifyReq(token, proof string) *leasev1.VerifyRequest {
	return &leasev1.VerifyRequest{Token: token, Proof: proof, Audience: audience, ArgumentDigest: argDigest, ToolId: toolID}
}

func proofFor(t *testing.T, h holder, c *leasev1.LeaseClaims) string {
	t.Helper()
	p, err := lease.NewProof(h.priv, claimsOf(c), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// errorReason returns the gRPC code and ErrorInfo reason of err.
func errorReason(err error) (codes.Code, string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info.GetReason()
		}
	}
	return st.Code(), ""
}

func fieldViolations(err error) []string {
	st, _ := status.FromError(err)
	var out []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}

func decodeSegment(seg string) (map[string]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}
