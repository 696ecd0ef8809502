package replica

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

func TestHeadsOnlyMoveForward(t *testing.T) {
	h := NewHeads(time.Second, nil)
	h.SetEpoch("t", 5)
	h.SetEpoch("t", 3)
	if e, _ := h.Epoch("t"); e != 5 {
		t.Fatalf("epoch went back to %d", e)
	}
	h.SetPointer(Pointer{ServerID: "s", Class: "t.c", Generation: 8, Revision: 10})
	h.SetPointer(Pointer{ServerID: "s", Class: "t.c", Generation: 7, Revision: 9}) // a late lazy read
	if p, _ := h.Pointer("s", "t.c"); p.Generation != 8 {
		t.Fatalf("an older head replaced a newer one: %+v", p)
	}
}

type countingPolicies struct {
	mu sync.Mutex
	n  int
}

func (c *countingPolicies) PolicyAt(_ context.Context, tenant string, epoch int64) (Policy, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	return Policy{Tenant: tenant, Epoch: epoch, Grants: []decision.Grant{{Subject: "a"}}}, nil
}

func (c *countingPolicies) Current(ctx context.Context, tenant string) (Policy, error) {
	return c.PolicyAt(ctx, tenant, 9)
}

func TestMaterialFetchesOncePerKey(t *testing.T) {
	src := &countingPolicies{}
	m := NewMaterial(src, nil, nil, 100)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = m.PolicyAt(context.Background(), "t", 4) }()
	}
	wg.Wait()
	if _, err := m.PolicyAt(context.Background(), "t", 4); err != nil || src.n != 1 {
		t.Fatalf("%d fetches for one (tenant, epoch): %v", src.n, err)
	}
	if p, _ := m.Current(context.Background(), "t"); p.Epoch != 9 {
		t.Fatal(p)
	}
	if _, _ = m.PolicyAt(context.Background(), "t", 9); src.n != 2 {
		t.Fatalf("the current policy was not remembered under its epoch (%d fetches)", src.n)
	}
}

type goneAfter struct {
	countingPolicies
	kept int64
}

func (g *goneAfter) PolicyAt(ctx context.Context, tenant string, epoch int64) (Policy, error) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	if epoch < g.kept {
		return Policy{}, ErrNotKept
	}
	return Policy{Tenant: tenant, Epoch: epoch}, nil
}

// TestNotKeptIsRemembered: a plan at an epoch the registry no longer holds
// costs one read, not one per Check.
func TestNotKeptIsRemembered(t *testing.T) {
	src := &goneAfter{kept: 5}
	m := NewMaterial(src, nil, nil, 100)
	for range 10 {
		if _, err := m.PolicyAt(context.Background(), "t", 3); err != ErrNotKept {
			t.Fatal(err)
		}
	}
	if src.n != 1 {
		t.Fatalf("%d reads for one epoch that is not kept", src.n)
	}
}
