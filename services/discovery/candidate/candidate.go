package candidate

import (
	"context"
	"time"
	"unicode/utf8"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// Tool is one tool of a valid candidate: the crawl's raw capture and what
// validation derived from it.
type Tool struct {
	// Crawled is the raw capture (raw JSON, canonical form, descriptor
	// digest).
	Crawled crawl.Tool
	// Derived is what validation derived (name, schema digests, dialect,
	// annotations, flags).
	Derived validate.Tool
}

// Candidate is the outcome of one scan before the commit.
type Candidate struct {
	// State is SNAPSHOT_PROVEN or UNVERSIONED_OBSERVATION for a whole, valid
	// catalog; INCOMPLETE or QUARANTINED otherwise.
	State catalogv1.DiscoveryState
	// Reason and Detail say why a candidate is refused; UNSPECIFIED and
	// empty otherwise.
	Reason discoveryv1.RunReason
	Detail string
	// Crawl is the crawl's result (pages, revision, digests, identity).
	Crawl *crawl.Result
	// Tools are the tools in page order; set only for a valid candidate.
	Tools []Tool
	// Flags are findings that did not refuse the catalog.
	Flags []validate.Flag
}

// Committable reports whether the candidate may go to the pointer CAS.
func (c *Candidate) Committable() bool {
	return c.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN ||
		c.State == catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
}

// Assess validates a crawl result. Only a whole catalog (proven, or an
// unversioned observation) is validated; a crawl fault is kept as it is.
// Unversioned observations are validated like proven catalogs: they may be
// shown to a model, so the same refusals apply.
func Assess(r *crawl.Result, l validate.Limits) *Candidate {
	c := &Candidate{State: r.State, Reason: r.Reason, Detail: r.Detail, Crawl: r}
	if !r.Whole() {
		return c
	}
	rep := validate.Catalog(r.Tools, l)
	if f := rep.Refusal; f != nil {
		c.State = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED
		c.Reason = f.Reason
		c.Detail = "tool " + f.Tool + ": " + f.Detail
		return c
	}
	c.Flags = rep.Flags
	c.Tools = make([]Tool, len(r.Tools))
	for i := range r.Tools {
		c.Tools[i] = Tool{Crawled: r.Tools[i], Derived: rep.Tools[i]}
	}
	return c
}

// Observe crawls a target and assesses the result: the outcome a discovery
// worker reaches before the commit, without any database.
func Observe(ctx context.Context, t crawl.Target, o crawl.Options, l validate.Limits) *Candidate {
	return Assess(crawl.Crawl(ctx, t, o), l)
}

// Micro is the precision snapshots are stored and digested at.
const Micro = time.Microsecond

// digestTool is the per-tool part of the snapshot digest.
type digestTool struct {
	ToolID             string `json:"tool_id"`
	Name               string `json:"name"`
	DescriptorDigest   string `json:"descriptor_digest"`
	InputSchemaDigest  string `json:"input_schema_digest"`
	OutputSchemaDigest string `json:"output_schema_digest"`
}

// digestInput is what the snapshot digest covers: every field of the
// snapshot except the digest itself, with each tool reduced to its ids and
// digests (the raw JSON is covered by the descriptor digest).
type digestInput struct {
	Schema             string       `json:"schema"`
	ServerID           string       `json:"server_id"`
	IdentityDigest     string       `json:"identity_digest"`
	EndpointDigest     string       `json:"endpoint_digest"`
	ProtocolVersion    string       `json:"protocol_version"`
	AudienceClass      string       `json:"audience_class"`
	Tenant             string       `json:"tenant"`
	DiscoveryStartedAt string       `json:"discovery_started_at"`
	ExpiresAt          string       `json:"expires_at"`
	PolicyEpoch        int64        `json:"policy_epoch"`
	Generation         int64        `json:"generation"`
	SourceRevision     string       `json:"source_revision"`
	PageRoot           string       `json:"page_root"`
	PageDigests        []string     `json:"page_digests"`
	Tools              []digestTool `json:"tools"`
	State              string       `json:"state"`
	RunID              string       `json:"run_id"`
	CacheScope         string       `json:"cache_scope"`
	TrustConfigDigest  string       `json:"trust_config_digest"`
}

// SnapshotDigest returns `sha256:<hex>` of the RFC 8785 JSON of the
// snapshot without its `snapshot_digest`: the fields of [digestInput], times
// as RFC 3339 UTC with microseconds, the state by its enum name (the state
// it was committed with: ELIGIBLE or UNVERSIONED_OBSERVATION), and each tool
// as {tool_id, name, descriptor_digest, input_schema_digest,
// output_schema_digest}.
func SnapshotDigest(s *catalogv1.Snapshot, committedState catalogv1.DiscoveryState) (string, error) {
	if b, ok := appendDigestJSON(make([]byte, 0, 1024+300*len(s.GetTools())), s, committedState); ok {
		return canonical.DigestBytes(b), nil
	}
	return canonical.DigestValue(digestInputOf(s, committedState))
}

// digestInputOf is what [SnapshotDigest] covers, as a value for
// encoding/json.
func digestInputOf(s *catalogv1.Snapshot, committedState catalogv1.DiscoveryState) digestInput {
	in := digestInput{
		Schema: s.GetSchema(), ServerID: s.GetServerId(), IdentityDigest: s.GetIdentityDigest(),
		EndpointDigest: s.GetEndpointDigest(), ProtocolVersion: s.GetProtocolVersion(),
		AudienceClass: s.GetAudienceClass(), Tenant: s.GetTenant(),
		DiscoveryStartedAt: stamp(s.GetDiscoveryStartedAt().AsTime()), ExpiresAt: stamp(s.GetExpiresAt().AsTime()),
		PolicyEpoch: s.GetPolicyEpoch(), Generation: s.GetGeneration(), SourceRevision: s.GetSourceRevision(),
		PageRoot: s.GetPageRoot(), PageDigests: s.GetPageDigests(), State: committedState.String(),
		RunID: s.GetRunId(), CacheScope: s.GetCacheScope(), TrustConfigDigest: s.GetTrustConfigDigest(),
		Tools: make([]digestTool, len(s.GetTools())),
	}
	if in.PageDigests == nil {
		in.PageDigests = []string{}
	}
	for i, t := range s.GetTools() {
		in.Tools[i] = digestTool{ToolID: t.GetToolId(), Name: t.GetName(), DescriptorDigest: t.GetDescriptorDigest(),
			InputSchemaDigest: t.GetInputSchemaDigest(), OutputSchemaDigest: t.GetOutputSchemaDigest()}
	}
	return in
}

// appendDigestJSON appends the RFC 8785 JSON of [digestInputOf] directly:
// members in the canonical (sorted) order, integers as canonical numbers.
// It gives the bytes canonical.Marshal gives for the same input (a test
// compares them) without encoding 100,000 tools with encoding/json and
// parsing them again. ok is false when a string is not valid UTF-8 (which
// encoding/json would have replaced): the caller falls back to the slow
// path then.
func appendDigestJSON(b []byte, s *catalogv1.Snapshot, committedState catalogv1.DiscoveryState) ([]byte, bool) {
	ok := true
	str := func(key, v string) {
		if !utf8.ValidString(v) {
			ok = false
		}
		b = canonical.AppendString(append(b, key...), v)
	}
	num := func(key string, v int64) { b = canonical.AppendNumber(append(b, key...), float64(v)) }
	str(`{"audience_class":`, s.GetAudienceClass())
	str(`,"cache_scope":`, s.GetCacheScope())
	str(`,"discovery_started_at":`, stamp(s.GetDiscoveryStartedAt().AsTime()))
	str(`,"endpoint_digest":`, s.GetEndpointDigest())
	str(`,"expires_at":`, stamp(s.GetExpiresAt().AsTime()))
	num(`,"generation":`, s.GetGeneration())
	str(`,"identity_digest":`, s.GetIdentityDigest())
	b = append(b, `,"page_digests":[`...)
	for i, d := range s.GetPageDigests() {
		if i > 0 {
			b = append(b, ',')
		}
		str("", d)
	}
	b = append(b, ']')
	str(`,"page_root":`, s.GetPageRoot())
	num(`,"policy_epoch":`, s.GetPolicyEpoch())
	str(`,"protocol_version":`, s.GetProtocolVersion())
	str(`,"run_id":`, s.GetRunId())
	str(`,"schema":`, s.GetSchema())
	str(`,"server_id":`, s.GetServerId())
	str(`,"source_revision":`, s.GetSourceRevision())
	str(`,"state":`, committedState.String())
	str(`,"tenant":`, s.GetTenant())
	b = append(b, `,"tools":[`...)
	for i, t := range s.GetTools() {
		if i > 0 {
			b = append(b, ',')
		}
		str(`{"descriptor_digest":`, t.GetDescriptorDigest())
		str(`,"input_schema_digest":`, t.GetInputSchemaDigest())
		str(`,"name":`, t.GetName())
		str(`,"output_schema_digest":`, t.GetOutputSchemaDigest())
		str(`,"tool_id":`, t.GetToolId())
		b = append(b, '}')
	}
	b = append(b, ']')
	str(`,"trust_config_digest":`, s.GetTrustConfigDigest())
	return append(b, '}'), ok
}

func stamp(t time.Time) string { return t.UTC().Truncate(Micro).Format("2006-01-02T15:04:05.000000Z") }
