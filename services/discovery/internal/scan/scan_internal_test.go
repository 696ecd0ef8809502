package scan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/secretref"
)

func server() *registryv1.Server {
	return &registryv1.Server{ServerId: "inv", Owner: "team", TrustLevel: registryv1.TrustLevel_TRUST_LEVEL_FIRST_PARTY,
		RevisionSource: registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED,
		Transport:      &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: "https://inv.example/mcp"}}}
}

func TestTrustDigestCoversWhatAScanTrusts(t *testing.T) {
	b := &registryv1.AudienceServer{ServerId: "inv", SecretRef: "env:A"}
	base := trustDigest(server(), "t.c", b)
	if trustDigest(server(), "t.c", b) != base {
		t.Fatal("not deterministic")
	}
	cosmetic := server()
	cosmetic.Description, cosmetic.DisplayName, cosmetic.Version = "new words", "Inventory", 9
	if trustDigest(cosmetic, "t.c", b) != base {
		t.Fatal("a cosmetic change altered the trust digest")
	}
	for name, mutate := range map[string]func(s *registryv1.Server, b *registryv1.AudienceServer) string{
		"trust level": func(s *registryv1.Server, _ *registryv1.AudienceServer) string {
			s.TrustLevel = registryv1.TrustLevel_TRUST_LEVEL_THIRD_PARTY
			return "t.c"
		},
		"pin": func(s *registryv1.Server, _ *registryv1.AudienceServer) string {
			s.IdentityPin = "sha256:x"
			return "t.c"
		},
		"transport": func(s *registryv1.Server, _ *registryv1.AudienceServer) string {
			s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: "inv"}}
			return "t.c"
		},
		"revision source": func(s *registryv1.Server, _ *registryv1.AudienceServer) string {
			s.RevisionSource = registryv1.RevisionSource_REVISION_SOURCE_NONE
			return "t.c"
		},
		"secret reference": func(_ *registryv1.Server, b *registryv1.AudienceServer) string { b.SecretRef = "env:B"; return "t.c" },
		"class":            func(*registryv1.Server, *registryv1.AudienceServer) string { return "t.d" },
	} {
		s, bb := server(), &registryv1.AudienceServer{ServerId: "inv", SecretRef: "env:A"}
		if trustDigest(s, mutate(s, bb), bb) == base {
			t.Errorf("%s did not change the trust digest", name)
		}
	}
}

func TestSecretReferences(t *testing.T) {
	const secret = "hunter2-value"
	lookup := func(k string) (string, bool) {
		if k == "SET" {
			return " " + secret + "\n", true
		}
		return "", false
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	p := secretref.Policy{Dirs: []string{dir}, EnvPrefixes: []string{"SET", "UN"}}
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"": "", "env:SET": secret, "file:" + file: secret} {
		if got, err := p.Resolve(ref, lookup); err != nil || got != want {
			t.Errorf("%q: %q %v", ref, got, err)
		}
	}
	for _, ref := range []string{"env:UNSET", "file:/nonexistent/x", "file:" + filepath.Join(dir, "missing"), "vault:kv/a", "literal-" + secret} {
		_, err := p.Resolve(ref, lookup)
		if err == nil {
			t.Errorf("%q resolved", ref)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%q: the error shows the secret: %v", ref, err)
		}
	}
}

func TestMaterialServerChanges(t *testing.T) {
	old := server()
	pinned := server()
	pinned.IdentityPin = "sha256:first-use"
	pinned.Version = 2
	if materialServerChange(old, pinned) {
		t.Fatal("discovery's own first-use pin counted as a change")
	}
	repinned := server()
	repinned.IdentityPin = "sha256:other"
	if !materialServerChange(pinned, repinned) {
		t.Fatal("a changed pin did not count")
	}
	cosmetic := server()
	cosmetic.Description, cosmetic.Owner = "x", "other-team"
	if materialServerChange(old, cosmetic) {
		t.Fatal("a cosmetic change counted")
	}
	if !materialServerChange(nil, old) {
		t.Fatal("a new server did not count")
	}
}

func TestBackoff(t *testing.T) {
	b := &retryPolicy{base: time.Second, max: 10 * time.Second}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 10 * time.Second} {
		got := time.Until(b.NextRetry(&rivertype.JobRow{Attempt: attempt}))
		if got > want || got < want-time.Second/2 {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
}

func TestFreshReadsAreSharedButNeverStale(t *testing.T) {
	var f fresh[int]
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) (int, error) {
		n := fetches.Add(1)
		<-release
		return int(n), nil
	}
	before := time.Now()
	var wg sync.WaitGroup
	got := make([]int, 5)
	wg.Go(func() { got[0], _ = f.get(context.Background(), "k", before, fetch) })
	for fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < 5; i++ {
		wg.Go(func() { got[i], _ = f.get(context.Background(), "k", before, fetch) })
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if fetches.Load() != 1 || got[4] != 1 {
		t.Fatalf("%d fetches, results %v: readers that allow the in-flight fetch must share it", fetches.Load(), got)
	}
	// A reader that needs a read started after now gets a new fetch.
	if v, _ := f.get(context.Background(), "k", time.Now(), fetch); v != 2 || fetches.Load() != 2 {
		t.Fatalf("stale read served: %d after %d fetches", v, fetches.Load())
	}
}

// recent waits for a fetch in flight that started within its age and
// serves its answer (triggers arriving together share one read), but never
// an older one, a failed one, or past its caller's context.
func TestRecentWaitsForTheReadInFlight(t *testing.T) {
	var f fresh[int]
	if _, ok := f.recent(context.Background(), "k", time.Second); ok {
		t.Fatal("an answer with no read at all")
	}
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = f.get(context.Background(), "k", time.Now(), func(context.Context) (int, error) {
			close(started)
			<-release
			return 7, nil
		})
	})
	<-started
	// A caller whose context ends first gets no answer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, ok := f.recent(ctx, "k", time.Second); ok {
		t.Fatal("an answer before the read in flight ended")
	}
	cancel()
	got := make(chan int, 1)
	wg.Go(func() {
		v, ok := f.recent(context.Background(), "k", time.Second)
		if !ok {
			v = -1
		}
		got <- v
	})
	select {
	case v := <-got:
		t.Fatalf("recent returned %d before the read in flight ended", v)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if v := <-got; v != 7 {
		t.Fatalf("recent = %d, want the read in flight's 7", v)
	}
	wg.Wait()
	// Older than the age allowed: no answer, even a finished one.
	time.Sleep(30 * time.Millisecond)
	if _, ok := f.recent(context.Background(), "k", 10*time.Millisecond); ok {
		t.Fatal("a read older than maxAge served")
	}
	// A failed read is never served.
	_, _ = f.get(context.Background(), "k", time.Now(), func(context.Context) (int, error) { return 0, context.DeadlineExceeded })
	if _, ok := f.recent(context.Background(), "k", time.Second); ok {
		t.Fatal("a failed read served")
	}
}
