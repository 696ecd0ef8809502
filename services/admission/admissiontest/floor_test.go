package admissiontest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/platform/postgres"
)

// floorMethod is the bench-only floor of Check: registered by
// [TestBenchAdmission] on the same server as AdmissionService (through
// [Options.Register]), so it runs behind the same interceptors (caller
// slot, access log, metrics, recovery, error translation, token
// verification), decodes the same CheckRequest and answers a CheckResponse
// of the same size, with no work between the two. It exists only in this
// test binary.
const (
	floorService = "toolcrib.bench.v1.CheckFloor"
	floorMethod  = "/" + floorService + "/Check"
)

// checkFloor answers every request with resp, a CheckResponse the real
// Check answered for the same request (set before the first call).
type checkFloor struct {
	resp atomic.Pointer[admissionv1.CheckResponse]
}

func (f *checkFloor) check(context.Context, *admissionv1.CheckRequest) (*admissionv1.CheckResponse, error) {
	return f.resp.Load(), nil
}

// register adds the floor to s the way generated code adds a service: the
// request decoded by the server, then the interceptor chain, then the
// handler.
func (f *checkFloor) register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: floorService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Check", Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(admissionv1.CheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*checkFloor).check(ctx, req.(*admissionv1.CheckRequest))
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: floorMethod}, h)
		}}},
	}, f)
}

// call is the client side: the same connection, request and response type
// as a Check.
func (f *checkFloor) call(conn grpc.ClientConnInterface, req *admissionv1.CheckRequest) func(ctx context.Context, _ int) error {
	return func(ctx context.Context, _ int) error {
		return conn.Invoke(ctx, floorMethod, req, new(admissionv1.CheckResponse))
	}
}

// cpuSplit measures where a Check's CPU goes beyond its floor's, at 16
// in flight, the two arms alternating: this process's CPU per call (client
// and server; the client's share is the same in both arms) and the CPU per
// Check of the Postgres backends serving the receipts database (the
// receipt each ALLOW writes; the floor writes none). It returns the line
// to print.
func cpuSplit(t *testing.T, a *Service, d time.Duration, check, floor func(ctx context.Context, i int) error) string {
	t.Helper()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, a.PostgresURL, "admission")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var self, pg [2]time.Duration
	var calls [2]int
	for range 5 {
		for i, call := range []func(ctx context.Context, i int) error{check, floor} {
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
	// The receipts of a Check slice are written in batches that may fall in
	// the next floor slice: all the backends' time is the Checks'.
	return fmt.Sprintf("admission: cpu in_flight=16 check_process_us=%.1f floor_process_us=%.1f check_receipts_pg_us=%.1f",
		us(self[0], calls[0]), us(self[1], calls[1]), us(pg[0]+pg[1], calls[0]))
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
