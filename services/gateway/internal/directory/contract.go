package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/platform/stdio"
	"github.com/toolcrib/toolcrib/services/gateway/internal/policy"
	"github.com/toolcrib/toolcrib/services/gateway/internal/sessionpool"
)

// Descriptor is one tool as a generation recorded it.
type Descriptor struct {
	// Name is the MCP tool name at the upstream.
	Name string
	// Title is the MCP title; empty when none.
	Title string
	// OutputSchema is the raw output schema; nil when none.
	OutputSchema json.RawMessage
	// Annotations are the raw annotations (hints, never trusted); nil when
	// none.
	Annotations json.RawMessage
	// Output is OutputSchema compiled; nil when none.
	Output *jsonschema.Schema
	// OutputErr is why OutputSchema does not compile (the call is then
	// refused: the result cannot be checked).
	OutputErr error
}

// Review is a tool's contract at one descriptor digest, at PolicyEpoch.
type Review struct {
	Contract    *registryv1.ToolContract
	PolicyEpoch int64
	// Approved: Contract is approved at that digest (it may be newer than
	// the approval admission allowed the call under, if published since).
	Approved bool
}

// AllowsSampling reports whether the tool's server may ask the calling
// client for a sampling during a call: the contract allows it and that
// contract is the approved one at the digest (a contract published since
// the call was allowed, not yet reviewed, grants nothing).
func (r Review) AllowsSampling() bool {
	return r.Approved && r.Contract.GetAllowSampling()
}

// Endpoint is where and how the gateway reaches one server for one
// audience class.
type Endpoint struct {
	// URL is the streamable HTTP endpoint; empty for a stdio server.
	URL string
	// Command and Args start a stdio server (URL empty); PinDir is the
	// directory pinned into its identity (empty for none).
	Command string
	Args    []string
	PinDir  string
	// Pin is the registry's identity pin of a stdio server (empty before
	// its first scan); Identity is the identity its command line and content
	// have at this call ([stdio.Hasher.Identity]).
	Pin, Identity string
	// Credential is the class's upstream credential; empty sends none.
	Credential string

	// verify re-checks a stdio server's identity with its pinned directory
	// walked now, right before its process is started.
	verify func() error
}

// Target is the endpoint as the upstream pool dials it.
func (e Endpoint) Target() sessionpool.Target {
	return sessionpool.Target{URL: e.URL, Command: e.Command, Args: e.Args, ContentIdentity: e.Identity, Credential: e.Credential,
		BeforeStart: e.verify}
}

// ErrIdentity is returned for a stdio server whose identity is not the one
// discovery pinned: the registered command changed since the catalog was
// proven, or the program behind it did (the executable, a script argument,
// a file of the pinned directory), or its identity cannot be computed. The
// gateway neither starts it nor calls it.
var ErrIdentity = errors.New("contract: the stdio server is not the identity discovery pinned")

// endpointTTL is how long an endpoint (URL and credential) is reused.
const endpointTTL = 30 * time.Second

// treeMaxAge is how long a call's identity check reuses a pinned
// directory's tree digest: a walk costs a stat per file, too much for every
// call to a large package. The executable and the script arguments are
// checked on every call, and the tree is walked afresh before a process is
// started, so within this bound only calls to an already running process
// (started from the pinned code) can follow a change of the directory.
const treeMaxAge = time.Second

// Directory answers the gateway's questions about tools and servers.
type Directory struct {
	reg     registryv1.RegistryServiceClient
	disc    discoveryv1.DiscoveryServiceClient
	secrets secretref.Policy
	lookup  func(string) (string, bool)
	// ids computes stdio identities on every call, from cached file
	// digests (a stat per file unless a file changed).
	ids *stdio.Hasher

	// mu makes each cache's read-then-write one step; the caches are
	// bounded LRUs.
	mu        sync.Mutex
	snapshots *lru.Cache[snapKey, *snapEntry]
	reviews   *lru.Cache[reviewKey, Review]
	endpoints *lru.Cache[epKey, epEntry]
}

type snapKey struct {
	server, class string
	generation    int64
}

type snapEntry struct {
	once  sync.Once
	tools map[string]*Descriptor // descriptor digest -> descriptor
	err   error
}

type reviewKey struct{ tool, class, digest string }

type epKey struct{ server, class string }

type epEntry struct {
	ep Endpoint
	at time.Time
}

// maxCached bounds each cache; past it the least recently used entry is
// forgotten (every entry is refetchable).
const maxCached = 4096

// New returns a directory over the registry and discovery clients (whose
// connections carry the service token); secrets confines the audience
// classes' secret references, lookup reads `env:` ones (nil: os.LookupEnv).
func New(reg registryv1.RegistryServiceClient, disc discoveryv1.DiscoveryServiceClient, secrets secretref.Policy, lookup func(string) (string, bool)) *Directory {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	snapshots, _ := lru.New[snapKey, *snapEntry](maxCached)
	reviews, _ := lru.New[reviewKey, Review](maxCached)
	endpoints, _ := lru.New[epKey, epEntry](maxCached)
	return &Directory{reg: reg, disc: disc, secrets: secrets, lookup: lookup, ids: &stdio.Hasher{TreeMaxAge: treeMaxAge},
		snapshots: snapshots, reviews: reviews, endpoints: endpoints}
}

// Descriptor returns the tool with digest in (server, class, generation).
func (d *Directory) Descriptor(ctx context.Context, server, class string, generation int64, digest string) (*Descriptor, error) {
	k := snapKey{server, class, generation}
	d.mu.Lock()
	e, _ := d.snapshots.Get(k)
	if e == nil {
		e = &snapEntry{}
		d.snapshots.Add(k, e)
	}
	d.mu.Unlock()
	e.once.Do(func() { e.tools, e.err = d.fetchSnapshot(ctx, k) })
	if e.err != nil {
		d.mu.Lock()
		if cur, ok := d.snapshots.Peek(k); ok && cur == e {
			d.snapshots.Remove(k) // not cached: the next call retries
		}
		d.mu.Unlock()
		return nil, e.err
	}
	t, ok := e.tools[digest]
	if !ok {
		return nil, fmt.Errorf("contract: generation %d of %s has no tool with digest %s", generation, server, digest)
	}
	return t, nil
}

func (d *Directory) fetchSnapshot(ctx context.Context, k snapKey) (map[string]*Descriptor, error) {
	resp, err := d.disc.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: k.server, AudienceClass: k.class, Generation: k.generation})
	if err != nil {
		return nil, fmt.Errorf("contract: discovery GetSnapshot: %w", err)
	}
	out := map[string]*Descriptor{}
	for _, t := range resp.GetSnapshot().GetTools() {
		var raw struct {
			Title        string          `json:"title"`
			OutputSchema json.RawMessage `json:"outputSchema"`
			Annotations  json.RawMessage `json:"annotations"`
		}
		_ = json.Unmarshal(t.GetRaw(), &raw) // discovery validated it as JSON
		desc := &Descriptor{Name: t.GetName(), Title: raw.Title, Annotations: raw.Annotations}
		if len(raw.OutputSchema) > 0 && string(raw.OutputSchema) != "null" {
			desc.OutputSchema = raw.OutputSchema
			desc.Output, desc.OutputErr = policy.CompileOutput(raw.OutputSchema)
		}
		out[t.GetDescriptorDigest()] = desc
	}
	return out, nil
}

// Review returns the tool's contract at digest as class reads it, read at
// a policy epoch of at least atLeast (the epoch admission decided at): a
// cached answer from an older epoch is read again.
func (d *Directory) Review(ctx context.Context, tool, class, digest string, atLeast int64) (Review, error) {
	k := reviewKey{tool, class, digest}
	d.mu.Lock()
	r, ok := d.reviews.Get(k)
	d.mu.Unlock()
	if ok && r.PolicyEpoch >= atLeast {
		return r, nil
	}
	resp, err := d.reg.GetToolReview(ctx, &registryv1.GetToolReviewRequest{ToolId: tool, DescriptorDigest: digest, AudienceClass: class})
	if err != nil {
		return Review{}, fmt.Errorf("contract: registry GetToolReview: %w", err)
	}
	r = Review{Contract: resp.GetContract(), PolicyEpoch: resp.GetPolicyEpoch(), Approved: resp.GetApproved()}
	d.mu.Lock()
	if old, ok := d.reviews.Peek(k); !ok || old.PolicyEpoch <= r.PolicyEpoch {
		d.reviews.Add(k, r)
	}
	d.mu.Unlock()
	return r, nil
}

// Endpoint returns how to reach server as class: its URL and the class's
// credential for it (resolved from the secret reference, kept in memory
// only). For a stdio server it computes the identity of its command line
// and content on every call and returns [ErrIdentity] when that is not the
// registry's pin, so a program replaced behind the same command line is
// never started or called under the old approval (a pinned directory's
// tree is reused for up to treeMaxAge, and walked again right before a
// process is started: [sessionpool.Target.BeforeStart]).
func (d *Directory) Endpoint(ctx context.Context, server, class string) (Endpoint, error) {
	k := epKey{server, class}
	d.mu.Lock()
	e, ok := d.endpoints.Get(k)
	d.mu.Unlock()
	ep := e.ep
	if !ok || time.Since(e.at) >= endpointTTL {
		var err error
		if ep, err = d.fetchEndpoint(ctx, server, class); err != nil {
			return Endpoint{}, err // not cached
		}
		d.mu.Lock()
		d.endpoints.Add(k, epEntry{ep: ep, at: time.Now()})
		d.mu.Unlock()
	}
	if ep.Command == "" {
		return ep, nil
	}
	id, err := d.ids.Identity(ep.Command, ep.Args, ep.PinDir)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	if ep.Pin != "" && id != ep.Pin {
		return Endpoint{}, ErrIdentity
	}
	ep.Identity = id
	ep.verify = func() error {
		fresh, err := d.ids.FreshIdentity(ep.Command, ep.Args, ep.PinDir)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrIdentity, err)
		}
		if fresh != id {
			return ErrIdentity
		}
		return nil
	}
	return ep, nil
}

func (d *Directory) fetchEndpoint(ctx context.Context, server, class string) (Endpoint, error) {
	srv, err := d.reg.GetServer(ctx, &registryv1.GetServerRequest{ServerId: server})
	if err != nil {
		return Endpoint{}, fmt.Errorf("contract: registry GetServer: %w", err)
	}
	var ep Endpoint
	switch t := srv.GetServer(); {
	case t.GetStreamableHttp() != nil:
		ep.URL = t.GetStreamableHttp().GetUrl()
	case t.GetStdio() != nil:
		ep.Command, ep.Args, ep.PinDir = t.GetStdio().GetCommand(), t.GetStdio().GetArgs(), t.GetStdio().GetPinDir()
		ep.Pin = t.GetIdentityPin()
	default:
		return Endpoint{}, errors.New("contract: the server has no transport the gateway can call")
	}
	cls, err := d.reg.GetAudienceClass(ctx, &registryv1.GetAudienceClassRequest{Name: class})
	if err != nil {
		return Endpoint{}, fmt.Errorf("contract: registry GetAudienceClass: %w", err)
	}
	var ref string
	for _, b := range cls.GetAudienceClass().GetServers() {
		if b.GetServerId() == server {
			ref = b.GetSecretRef()
		}
	}
	cred, err := d.secrets.Resolve(ref, d.lookup)
	if err != nil {
		return Endpoint{}, fmt.Errorf("contract: the audience class's upstream credential: %w", err)
	}
	ep.Credential = cred
	return ep, nil
}
