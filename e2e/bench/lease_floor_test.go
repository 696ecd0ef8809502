package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	leasev1 "github.com/toolcrib/toolcrib/gen/toolcrib/lease/v1"
	"github.com/toolcrib/toolcrib/platform/service"
)

// The lease floors are bench-only methods on the lease service's own gRPC
// server (leasesvc.Config.Extra), behind the same interceptors as
// LeaseService, with its Postgres pool and Redis client. Each decodes the
// request its real RPC gets and answers a response of the same size (one
// the real RPC answered), doing only the work the RPC's rules require:
//
//   - Issue: one EdDSA verification (the signed receipt), one EdDSA
//     signature (the lease) and one row durably committed through a group
//     commit like the lease store's (at most two flushers, each batch one
//     INSERT … unnest in one transaction, synchronous_commit as the server
//     has it) into a table with a unique receipt id, which is the
//     receipt's single use as the lease store keeps it;
//   - Issue's receipt floor: the same, but the row committed is the
//     execution receipt the rules require (DESIGN §7: written before the
//     lease is returned) — the lease's claims, each in a column of the type
//     the lease store gives it (the lease id once, as the primary key), with
//     the unique index on the admission receipt that is its single use —
//     instead of three columns that record no claim. No CHECK, no freeze
//     read, no lock: only the record. Issue's target is against this floor
//     (a row that records who was leased what is not optional, so the
//     first floor is below what the rules allow; it is printed beside it,
//     as admission's bare floor is beside its validated floor);
//   - Redeem: one Redis SET NX PX on a fresh key (single use), the commands
//     pending at once in one pipeline as the ledger sends them;
//   - Verify: two EdDSA verifications (lease and holder proof) and the SET
//     NX of Redeem.
//
// The RPC itself (transport, interceptors, token verification) is the
// health part of each floor. They exist only in this test binary.
const (
	leaseFloorService = "toolcrib.bench.v1.LeaseFloor"
	issueFloorMethod  = "/" + leaseFloorService + "/Issue"
	redeemFloorMethod = "/" + leaseFloorService + "/Redeem"
	// issueReceiptFloorMethod is Issue's receipt floor (see above).
	issueReceiptFloorMethod = "/" + leaseFloorService + "/IssueReceipt"
	verifyFloorMethod       = "/" + leaseFloorService + "/Verify"
)

// Sizes of the signed material: a compact JWS of a signed receipt, of a
// lease, of a holder proof (the signing input; the signature is 64 bytes).
const (
	floorReceiptBytes = 400
	floorLeaseBytes   = 700
	floorProofBytes   = 300
)

// leaseFloors is the floor handlers and what they share.
type leaseFloors struct {
	// The responses the floors answer: ones the real Issue and Verify
	// answered (set before the first floor call).
	issueResp  atomic.Pointer[leasev1.IssueResponse]
	verifyResp atomic.Pointer[leasev1.VerifyResponse]

	priv                  ed25519.PrivateKey
	pub                   ed25519.PublicKey
	receipt, lease, proof []byte
	receiptSig, leaseSig  []byte
	proofSig              []byte
	setnx, commit, record *floorGroup
	keys                  atomic.Int64
	tableOnce             sync.Once
	tableErr              error
	recordOnce            sync.Once
	recordErr             error
	redeemResp            proto.Message
}

func newLeaseFloors() (*leaseFloors, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	f := &leaseFloors{pub: pub, priv: priv,
		receipt: make([]byte, floorReceiptBytes), lease: make([]byte, floorLeaseBytes), proof: make([]byte, floorProofBytes),
		redeemResp: &leasev1.VerifyResponse{Valid: true}}
	for _, b := range [][]byte{f.receipt, f.lease, f.proof} {
		_, _ = rand.Read(b)
	}
	f.receiptSig, f.leaseSig, f.proofSig = ed25519.Sign(priv, f.receipt), ed25519.Sign(priv, f.lease), ed25519.Sign(priv, f.proof)
	return f, nil
}

// register is the lease service's Config.Extra: the floor methods on its
// server, over its pool and Redis client.
func (f *leaseFloors) register(s *grpc.Server, d *service.Deps) {
	rc := d.Redis
	f.setnx = &floorGroup{max: 128, run: func(ctx context.Context, k int) error {
		cmds := make([]*redis.BoolCmd, k)
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.SetNX(ctx, rc.Key("floor", strconv.FormatInt(f.keys.Add(1), 10)), 1, time.Minute)
			}
			return nil
		})
		for _, c := range cmds {
			if ok, cerr := c.Result(); err == nil && (cerr != nil || !ok) {
				err = fmt.Errorf("floor: SET NX of a fresh key: %v, %v", ok, cerr)
			}
		}
		return err
	}}
	pool := d.Pool
	f.commit = &floorGroup{max: 256, run: func(ctx context.Context, k int) error {
		f.tableOnce.Do(func() {
			_, f.tableErr = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_floor_leases (lease_id uuid PRIMARY KEY,
  receipt_id text NOT NULL UNIQUE, issued_at timestamptz NOT NULL)`)
		})
		if f.tableErr != nil {
			return f.tableErr
		}
		ids, receipts, at := make([]uuid.UUID, k), make([]string, k), make([]time.Time, k)
		now := time.Now()
		for i := range k {
			ids[i], receipts[i], at[i] = uuid.New(), uuid.NewString(), now
		}
		_, err := pool.Exec(ctx, `INSERT INTO bench_floor_leases (lease_id, receipt_id, issued_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[])`, ids, receipts, at)
		return err
	}}
	f.record = &floorGroup{max: 256, run: func(ctx context.Context, k int) error {
		f.recordOnce.Do(func() { _, f.recordErr = pool.Exec(ctx, receiptFloorTable) })
		if f.recordErr != nil {
			return f.recordErr
		}
		return f.writeReceipts(ctx, pool, k)
	}}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: leaseFloorService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Issue", Handler: unaryFloor(issueFloorMethod, func() proto.Message { return new(leasev1.IssueRequest) }, f.issue)},
			{MethodName: "IssueReceipt", Handler: unaryFloor(issueReceiptFloorMethod, func() proto.Message { return new(leasev1.IssueRequest) }, f.issueReceipt)},
			{MethodName: "Redeem", Handler: unaryFloor(redeemFloorMethod, func() proto.Message { return new(leasev1.LeaseClaims) }, f.redeem)},
			{MethodName: "Verify", Handler: unaryFloor(verifyFloorMethod, func() proto.Message { return new(leasev1.VerifyRequest) }, f.verify)},
		},
	}, f)
}

var errFloorSignature = errors.New("floor: the signature does not verify")

func (f *leaseFloors) issue(ctx context.Context) (proto.Message, error) {
	return f.issueInto(ctx, f.commit)
}

func (f *leaseFloors) issueReceipt(ctx context.Context) (proto.Message, error) {
	return f.issueInto(ctx, f.record)
}

// issueInto is an Issue floor committing its row through g.
func (f *leaseFloors) issueInto(ctx context.Context, g *floorGroup) (proto.Message, error) {
	if !ed25519.Verify(f.pub, f.receipt, f.receiptSig) {
		return nil, errFloorSignature
	}
	_ = ed25519.Sign(f.priv, f.lease)
	if err := g.call(ctx); err != nil {
		return nil, err
	}
	return f.issueResp.Load(), nil
}

// receiptFloorTable is the receipt floor's table: an execution receipt's
// record of its lease (the claims a lease carries and the key that signed
// it), typed as the lease store types them, the lease id once as the
// primary key, and the admission receipt's single use as a unique index.
const receiptFloorTable = `CREATE TABLE IF NOT EXISTS bench_floor_receipts (
  lease_id uuid PRIMARY KEY, admission_receipt_id text NOT NULL UNIQUE, subject text NOT NULL,
  tenant_id text NOT NULL, tool_id text NOT NULL, server_id text NOT NULL, audience_class text NOT NULL,
  descriptor_digest text NOT NULL, generation bigint NOT NULL, policy_epoch bigint NOT NULL,
  argument_digest text NOT NULL, audience text NOT NULL, holder_thumbprint text NOT NULL,
  key_id text NOT NULL, issued_at timestamptz NOT NULL, expires_at timestamptz NOT NULL)`

// writeReceipts commits k execution receipts in one INSERT … unnest, each
// the claims of the lease the real Issue answered, under a fresh lease id
// and admission receipt id (version-7 UUIDs, as both services make them).
func (f *leaseFloors) writeReceipts(ctx context.Context, pool *pgxpool.Pool, k int) error {
	c := f.issueResp.Load().GetClaims()
	var (
		ids                                                                = make([]uuid.UUID, k)
		admission, subjects, tenants, tools, servers, classes, descriptors = make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
		argDigests, audiences, holders, kids                               = make([]string, k), make([]string, k), make([]string, k), make([]string, k)
		generations, epochs                                                = make([]int64, k), make([]int64, k)
		issuedAt, expiresAt                                                = make([]time.Time, k), make([]time.Time, k)
	)
	now := time.Now()
	for i := range k {
		ids[i], admission[i] = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()).String()
		subjects[i], tenants[i], tools[i], servers[i] = c.GetSubject(), c.GetTenantId(), c.GetToolId(), c.GetServerId()
		classes[i], descriptors[i], argDigests[i], audiences[i] = c.GetAudienceClass(), c.GetDescriptorDigest(), c.GetArgumentDigest(), c.GetAudience()
		holders[i], kids[i], generations[i], epochs[i] = c.GetHolderThumbprint(), floorKeyID, c.GetGeneration(), c.GetPolicyEpoch()
		issuedAt[i], expiresAt[i] = now, now.Add(time.Minute)
	}
	_, err := pool.Exec(ctx, `INSERT INTO bench_floor_receipts SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[],
  $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::text[],
  $13::text[], $14::text[], $15::timestamptz[], $16::timestamptz[])`, ids, admission, subjects, tenants, tools, servers,
		classes, descriptors, generations, epochs, argDigests, audiences, holders, kids, issuedAt, expiresAt)
	return err
}

// floorKeyID is the key id the receipt floor records: as long as the lease
// keys' ids (an RFC 7638 thumbprint).
const floorKeyID = "Xq5s0hVb8kN2mYtR4cLwE7uJ1gZfP9aD3oHiK6nQvWU"

func (f *leaseFloors) redeem(ctx context.Context) (proto.Message, error) {
	if err := f.setnx.call(ctx); err != nil {
		return nil, err
	}
	return f.redeemResp, nil
}

func (f *leaseFloors) verify(ctx context.Context) (proto.Message, error) {
	if !ed25519.Verify(f.pub, f.lease, f.leaseSig) || !ed25519.Verify(f.pub, f.proof, f.proofSig) {
		return nil, errFloorSignature
	}
	if err := f.setnx.call(ctx); err != nil {
		return nil, err
	}
	return f.verifyResp.Load(), nil
}

// unaryFloor is a method handler as generated code writes one: the request
// decoded by the server, then the interceptor chain, then work.
func unaryFloor(method string, newReq func() proto.Message, work func(context.Context) (proto.Message, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := newReq()
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) { return work(ctx) }
		if interceptor == nil {
			return h(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}
}

// floorGroup is the least a batch of concurrent calls does: what is
// pending when a flusher (at most two) looks is one run of at most max.
// As in the lease store, the caller that takes a flusher slot writes on
// its own goroutine until its own batch is written (at one call in
// flight: no goroutine started, no hand-off), then hands the slot on.
type floorGroup struct {
	max      int
	run      func(ctx context.Context, n int) error
	mu       sync.Mutex
	pending  []chan error
	flushers int
}

func (g *floorGroup) call(ctx context.Context) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.pending = append(g.pending, done)
	lead := g.flushers < 2
	if lead {
		g.flushers++
	}
	g.mu.Unlock()
	if lead {
		g.flush(done)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *floorGroup) flush(mine chan error) {
	for {
		g.mu.Lock()
		batch := g.pending[:min(len(g.pending), g.max)]
		if len(batch) == 0 {
			g.flushers--
			g.mu.Unlock()
			return
		}
		if mine != nil && len(mine) > 0 {
			g.mu.Unlock()
			go g.flush(nil)
			return
		}
		g.pending = g.pending[len(batch):len(g.pending):len(g.pending)]
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := g.run(ctx, len(batch))
		cancel()
		for _, done := range batch {
			done <- err
		}
	}
}
