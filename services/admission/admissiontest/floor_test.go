package admissiontest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/admission/internal/args"
	"github.com/toolcrib/toolcrib/services/admission/internal/receipts"
)

// floorMethod is the bench-only floor of Check: registered by
// [TestBenchAdmission] on the same server as AdmissionService (through
// [Options.Register]), so it runs behind the same interceptors (caller
// slot, access log, metrics, recovery, error translation, token
// verification), decodes the same CheckRequest and answers a CheckResponse
// of the same size, with no work between the two. It exists only in this
// test binary.
//
// signedFloorMethod is the floor the rules set for an ALLOW: the same
// handler plus one Ed25519 signature over a signing input of the size of
// the signed receipt the real Check returned (DESIGN §7: every ALLOW
// receipt is signed), and nothing else.
const (
	floorService      = "toolcrib.bench.v1.CheckFloor"
	floorMethod       = "/" + floorService + "/Check"
	signedFloorMethod = "/" + floorService + "/SignedCheck"
	// storedFloorMethod is the signed floor plus what the rules require of
	// every decision besides: its receipt stored (DESIGN §7: receipt
	// coverage 100 %), a copy of the response's receipt under a fresh
	// time-ordered id queued on the same receipts writer as Check's.
	storedFloorMethod = "/" + floorService + "/StoredCheck"
	// validatedFloorMethod is the stored floor plus the one piece of a
	// cached Check's work the rules require on every call besides (DESIGN
	// §7: "the argument check runs on every call, after the cache", under
	// caps on size and work; the receipt binds the argument digest): the
	// request's arguments parsed under the caps and digested (RFC 8785) by
	// the fastest code for it there is here, Check's own (args.Parse: a
	// floor built on a slower decoder would flatter Check), and validated
	// against the tool's input schema compiled once (platform/schema's
	// compiler, the one the design names).
	validatedFloorMethod = "/" + floorService + "/ValidatedCheck"
)

// checkFloor answers every request with resp, a CheckResponse the real
// Check answered for the same request (set before the first call).
type checkFloor struct {
	resp atomic.Pointer[admissionv1.CheckResponse]
	// key and input are what the signed floor signs on every call: a
	// fresh key and the signing input of resp's signed receipt.
	key   ed25519.PrivateKey
	input atomic.Pointer[[]byte]
	// receipts is Check's receipts writer (set before the first stored
	// floor call).
	receipts *receipts.Writer
	// schema is the tool's input schema, compiled once (set before the
	// first validated floor call).
	schema *jsonschema.Schema
}

// set makes the floors answer resp.
func (f *checkFloor) set(resp *admissionv1.CheckResponse) error {
	tok := resp.GetSignedReceipt()
	dot := strings.LastIndexByte(tok, '.')
	if dot < 0 {
		return fmt.Errorf("the response carries no signed receipt (%q)", tok)
	}
	if f.key == nil {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		f.key = key
	}
	in := []byte(tok[:dot])
	f.input.Store(&in)
	f.resp.Store(resp)
	return nil
}

func (f *checkFloor) check(context.Context, *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	return f.resp.Load(), nil
}

func (f *checkFloor) signedCheck(context.Context, *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	if sig := ed25519.Sign(f.key, *f.input.Load()); len(sig) != ed25519.SignatureSize {
		return nil, errors.New("no signature")
	}
	return f.resp.Load(), nil
}

func (f *checkFloor) storedCheck(ctx context.Context, req *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	resp, err := f.signedCheck(ctx, req)
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	r := proto.Clone(resp.GetReceipt()).(*admissionv1.Receipt)
	r.ReceiptId = id.String()
	if err := f.receipts.Add(r); err != nil {
		return nil, err
	}
	return resp, nil
}

func (f *checkFloor) validatedCheck(ctx context.Context, req *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	parsed, problem := args.Parse(req.GetArguments(), args.DefaultLimits)
	if problem != "" {
		return nil, errors.New(problem)
	}
	if err := f.schema.Validate(parsed.Value); err != nil {
		return nil, err
	}
	return f.storedCheck(ctx, req)
}

// register adds the floor to s the way generated code adds a service: the
// request decoded by the server, then the interceptor chain, then the
// handler.
func (f *checkFloor) register(s *grpc.Server) {
	method := func(name, full string, handle func(*checkFloor, context.Context, *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error)) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(admissionv1.CheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return handle(srv.(*checkFloor), ctx, req.(*admissionv1.CheckRequest))
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
		}}
	}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: floorService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			method("Check", floorMethod, (*checkFloor).check),
			method("SignedCheck", signedFloorMethod, (*checkFloor).signedCheck),
			method("StoredCheck", storedFloorMethod, (*checkFloor).storedCheck),
			method("ValidatedCheck", validatedFloorMethod, (*checkFloor).validatedCheck),
		},
	}, f)
}

// call is the client side of the floor: the same connection, request and
// response type as a Check.
func (f *checkFloor) call(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return invoke(conn, floorMethod, req)
}

// storedCall is the client side of the stored floor.
func (f *checkFloor) storedCall(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return invoke(conn, storedFloorMethod, req)
}

// validatedCall is the client side of the validated floor.
func (f *checkFloor) validatedCall(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return invoke(conn, validatedFloorMethod, req)
}

// signedCall is the client side of the signed floor.
func (f *checkFloor) signedCall(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return invoke(conn, signedFloorMethod, req)
}

func invoke(conn grpc.ClientConnInterface, method string, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return func(ctx context.Context, _ int) error {
		return conn.Invoke(ctx, method, req, new(admissionv1.CheckResponse))
	}
}

// cpuSplit measures where a Check's CPU goes beyond its floors', at 16
// in flight, the five arms (Check, floor, signed, stored and validated
// floor) alternating: this process's CPU per call (client and server; the
// client's share is the same in every arm) and the CPU per receipt of the
// Postgres backends serving the receipts database (each Check, stored and
// validated floor call writes one; the other floors write none). It returns
// the line to print.
func cpuSplit(t *testing.T, a *Service, d time.Duration, check, floor, signedFloor, storedFloor, validatedFloor func(ctx context.Context, i int) error) string {
	t.Helper()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, a.PostgresURL, "admission")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var self, pg [5]time.Duration
	var calls [5]int
	for range 5 {
		for i, call := range []func(ctx context.Context, i int) error{check, floor, signedFloor, storedFloor, validatedFloor} {
			pids := backends(t, pool)
			pg0, s0 := pidsCPU(pids), selfCPU(t)
			lat, _, errs := sample(16, d/10, call)
			if errs > 0 {
				t.Fatalf("%d calls failed", errs)
			}
			self[i] += selfCPU(t) - s0
			pg[i] += pidsCPU(pids) - pg0
			calls[i] += len(lat)
		}
	}
	us := func(x time.Duration, n int) float64 { return float64(x.Microseconds()) / float64(n) }
	// The receipts of a Check, stored or validated floor slice are written
	// in batches that may fall in the next slice: all the backends' time is
	// theirs, one receipt per call of each.
	return fmt.Sprintf("admission: cpu in_flight=16 check_process_us=%.1f floor_process_us=%.1f signed_floor_process_us=%.1f stored_floor_process_us=%.1f validated_floor_process_us=%.1f receipts_pg_us=%.1f",
		us(self[0], calls[0]), us(self[1], calls[1]), us(self[2], calls[2]), us(self[3], calls[3]), us(self[4], calls[4]),
		us(pg[0]+pg[1]+pg[2]+pg[3]+pg[4], calls[0]+calls[3]+calls[4]))
}

// backends are the process ids of the Postgres backends connected to
// pool's database, other than the one asking.
func backends(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// pidsCPU is the user and system CPU time the processes have used (a
// process that is gone counts nothing).
func pidsCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		// utime and stime are the 12th and 13th fields after the command
		// name's closing parenthesis, in clock ticks (USER_HZ, 100).
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			sum += time.Duration(u+st) * 10 * time.Millisecond
		}
	}
	return sum
}

// selfCPU is this process's user and system CPU time.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
