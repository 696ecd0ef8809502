package decision

import (
	"testing"
	"time"
)

// TestSeed004Admit is seed 004's eleven admit() cases, each mapped onto
// the facts of this package. The seed's tool.version is our descriptor
// digest in the active generation, tool.approvedVersion the digest the
// approval binds, call.version the plan's digest, policyValidUntilMs the
// replica's freshness bound, call.tenant the tenant of the audience class
// the request names, actor the verified principal.
//
// The seed's four invalid_input cases are malformed values of the seed's own
// objects. Here the principal and the replica's facts come from verified
// sources, so what can be malformed is the request and the decision time:
//   - policyValidUntilMs undefined (a required value missing) → the plan's
//     descriptor digest missing;
//   - policyValidUntilMs NaN (a number that is no number) → generation 0;
//   - nowMs NaN → no decision time;
//   - scopes "shipment:readwrite" (a string where a list belongs) → the
//     arguments are a JSON string, not an object.
func TestSeed004Admit(t *testing.T) {
	cases := []struct {
		seed string
		mut  func(*Facts)
		want Reason
	}{
		{"allow", func(*Facts) {}, Allow},
		{"enabled: false", func(f *Facts) { f.Review.Enabled = false }, Disabled},
		{"version 8, approved 7", func(f *Facts) {
			f.ActiveTool = &Tool{DescriptorDigest: digest("8")}
			f.PlanTool = f.ActiveTool
			f.Review.Approved = nil
		}, Unreviewed},
		{"call version 6", func(f *Facts) { f.Request.DescriptorDigest = digest("6") }, StaleSchema},
		{"now = policyValidUntil", func(f *Facts) { f.Now = f.PolicyFreshUntil }, StalePolicy},
		{"call tenant demo-b", func(f *Facts) { f.Request.AudienceClass = "demo-b.readers" }, Forbidden},
		{"actor scopes []", func(f *Facts) { f.Current.Scopes = []string{} }, Forbidden},
		{"policyValidUntilMs undefined", func(f *Facts) { f.Request.DescriptorDigest = "" }, InvalidInput},
		{"policyValidUntilMs NaN", func(f *Facts) { f.Request.Generation = 0 }, InvalidInput},
		{"nowMs NaN", func(f *Facts) { f.Now = time.Time{} }, InvalidInput},
		{"scopes a string", func(f *Facts) { f.Request.ArgumentsProblem = "must be a JSON object" }, InvalidInput},
	}
	if len(cases) != 11 {
		t.Fatalf("%d cases; the seed has eleven", len(cases))
	}
	for _, tc := range cases {
		f := clone(allowFacts())
		tc.mut(&f)
		if got := Decide(f).Reason; got != tc.want {
			t.Errorf("seed case %q: %v, want %v", tc.seed, got, tc.want)
		}
	}
}
