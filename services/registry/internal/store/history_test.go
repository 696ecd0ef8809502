package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// The policy history agrees with an independent oracle: after each of a
// few hundred random grants, revokes and class changes (some touching
// nothing held, some emptying a grant), the current policy is remembered;
// at the end, the policy at every epoch reached equals what was current at
// that epoch. So a past epoch is reconstructed exactly and never changes.
func TestPolicyHistoryAgreesWithEveryPastPolicy(t *testing.T) {
	s, _ := newStore(t)
	seed(t, s)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	subjects := []string{"alice", "bob", ""}
	groups := []string{"readers", "writers"}
	scopes := []string{"a:read", "b:read", "c:write"}
	classes := []string{"acme.readers"}
	pick := func(from []string) []string {
		var out []string
		for _, x := range from {
			if rng.IntN(2) == 0 {
				out = append(out, x)
			}
		}
		return out
	}
	oracle := map[int64]*registryv1.Policy{}
	remember := func() {
		p, _, err := s.GetPolicy(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		oracle[p.GetPolicyEpoch()] = p
	}
	remember()
	for i := range 300 {
		g := GrantChange{TenantID: "acme", Scopes: pick(scopes)}
		if sub := subjects[rng.IntN(len(subjects))]; sub != "" {
			g.Subject = sub
		} else {
			g.Group = groups[rng.IntN(len(groups))]
		}
		var err error
		switch op := rng.IntN(5); {
		case op < 2:
			g.AudienceClasses = pick(classes)
			if len(g.Scopes)+len(g.AudienceClasses) == 0 {
				g.Scopes = scopes[:1]
			}
			// A condition set, changed or cleared with the change (issue
			// 25): the history keeps the one in force at each epoch.
			if c := rng.IntN(4); c < 3 {
				g.SetCondition, g.Condition = true, []string{"", `request.run_id != ""`, "false"}[c]
			}
			_, _, err = s.Grant(ctx, g)
		case op < 4:
			_, _, err = s.Revoke(ctx, g)
			var nf *NotFoundError
			if errors.As(err, &nf) {
				continue // no such grant: nothing changed, no epoch
			}
		default:
			cur, gerr := s.GetAudienceClass(ctx, "acme.readers")
			if gerr != nil {
				t.Fatal(gerr)
			}
			next := proto.Clone(cur).(*registryv1.AudienceClass)
			next.Description = fmt.Sprintf("change %d", i)
			next.Servers[0].SecretRef = fmt.Sprintf("env:SRV_TOKEN_%d", i)
			_, _, err = s.PutAudienceClass(ctx, next, cur.GetVersion())
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		remember()
	}
	if len(oracle) < 150 {
		t.Fatalf("only %d epochs reached; the walk did too little", len(oracle))
	}
	for e, want := range oracle {
		got, _, err := s.GetPolicyAt(ctx, "acme", e)
		if err != nil {
			t.Fatalf("at %d: %v", e, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("policy at epoch %d:\n got %v\nwant %v", e, got, want)
		}
	}
}
