package scan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/services/discovery/candidate"
	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/internal/comparison"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

type disposition int

const (
	done   disposition = iota // finished: nothing to retry
	retry                     // INCOMPLETE: River retries with backoff
	cancel                    // QUARANTINED or gone: no retry
)

type outcome struct {
	disposition disposition
	reason      discoveryv1.RunReason
}

const (
	stIncomplete  = catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
	stQuarantined = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED
	stUnversioned = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	stValidating  = catalogv1.DiscoveryState_DISCOVERY_STATE_VALIDATING
	stDiscovering = catalogv1.DiscoveryState_DISCOVERY_STATE_DISCOVERING
	stEligible    = catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
)

// validatingRecordThreshold is the catalog size from which the transient
// VALIDATING and SNAPSHOT_PROVEN states are written to the run record
// (for smaller catalogs they last microseconds; the run goes from
// DISCOVERING to its end state in the record).
const validatingRecordThreshold = 1000

// scanState is what one scan accumulates for its run record.
type scanState struct {
	s       *Scanner
	ctx     context.Context
	runID   string
	jobID   int64
	args    ScanArgs
	started time.Time
	end     store.RunEnd
	sess    *crawl.Session // closed at the end unless handed to linger

	// What the steps learned, in order.
	srv     *registryv1.Server
	tenant  string // the audience class's
	bind    *registryv1.AudienceServer
	epoch   int64
	view    store.ScanView
	opts    crawl.Options
	trust   string
	decided int64 // list_changed count when the crawl decided
}

// finish records the run's end (on a context that survives the job's) and
// says what River should do.
func (st *scanState) finish() outcome {
	ctx, cancelFn := context.WithTimeout(context.WithoutCancel(st.ctx), 30*time.Second)
	defer cancelFn()
	if err := st.s.store.FinishRun(ctx, st.runID, st.end); err != nil {
		st.s.lg.ErrorContext(ctx, "record run end", "run", st.runID, "error", err)
	}
	return dispose(st.end.State, st.end.Reason)
}

func dispose(state catalogv1.DiscoveryState, reason discoveryv1.RunReason) outcome {
	switch {
	case state == stQuarantined || reason == discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED ||
		reason == discoveryv1.RunReason_RUN_REASON_EGRESS_REFUSED:
		return outcome{cancel, reason}
	case state == stIncomplete:
		return outcome{retry, reason}
	}
	return outcome{done, reason}
}

// fail ends the run INCOMPLETE or QUARANTINED.
func (st *scanState) fail(state catalogv1.DiscoveryState, reason discoveryv1.RunReason, format string, args ...any) outcome {
	st.end.State, st.end.Reason, st.end.Detail = state, reason, fmt.Sprintf(format, args...)
	return st.finish()
}

// registryFault turns a registry error into the run's end.
func (st *scanState) registryFault(what string, err error) outcome {
	if errors.Is(err, registryclient.ErrNotFound) {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED, "%s is no longer registered", what)
	}
	if st.ctx.Err() != nil {
		return st.cancelled()
	}
	return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_REGISTRY_UNAVAILABLE, "reading %s from the registry: %v", what, err)
}

// cancelled ends a run whose job context ended: a timeout, the pair's lock
// lost with its session (see [pairLocks]), or the process stopping (the
// scan is retried in every case).
func (st *scanState) cancelled() outcome {
	if errors.Is(st.ctx.Err(), context.DeadlineExceeded) {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR, "the scan exceeded its timeout of %s", st.s.cfg.ScanTimeout)
	}
	if errors.Is(context.Cause(st.ctx), errPairLockLost) {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_WORKER_LOST, "%v (%s); the scan stopped, as another worker may scan the pair now", errPairLockLost, st.s.cfg.Worker)
	}
	return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_WORKER_LOST, "the discovery process stopped during the scan (%s)", st.s.cfg.Worker)
}

// binding returns the class's binding for the server, nil when none.
func binding(c *registryv1.AudienceClass, serverID string) *registryv1.AudienceServer {
	for _, b := range c.GetServers() {
		if b.GetServerId() == serverID {
			return b
		}
	}
	return nil
}

// scan runs one scan; see the package doc. b and berr are the registry
// read of step 1, made before the pair's lock was taken and the run started
// (its row carries the tenant it read); view is the pointer as the run
// started, read holding the pair's lock.
func (s *Scanner) scan(ctx context.Context, runID string, jobID int64, a ScanArgs, b registryclient.Binding, berr error, view store.ScanView) outcome {
	st := &scanState{s: s, ctx: ctx, runID: runID, jobID: jobID, args: a, view: view, started: time.Now().Truncate(candidate.Micro)}
	defer func() {
		if st.sess != nil {
			_ = st.sess.Close()
		}
	}()
	if out, ok := st.readRegistry(b, berr); !ok {
		return out
	}
	if out, ok := st.connect(); !ok {
		return out
	}
	cand, out, ok := st.crawl()
	if !ok {
		return out
	}
	if out, ok := st.recheck(st.srv, st.trust, st.epoch); !ok {
		return out
	}
	return st.commit(cand)
}

// readRegistry is step 1: the server, the audience class's binding of it,
// the class's tenant and its policy epoch (one registry read of one
// snapshot, whatever the class's size; [scanWorker.Work] made it before
// starting the run, see [Scanner.readBinding]). The pointer was read with
// the run's start.
func (st *scanState) readRegistry(b registryclient.Binding, err error) (outcome, bool) {
	a := st.args
	if err != nil {
		return st.bindingFault(err), false
	}
	st.end.TenantID = b.TenantID
	if b.Binding == nil {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED, "audience class %s no longer covers server %s", a.AudienceClass, a.ServerID), false
	}
	st.end.PolicyEpoch = b.PolicyEpoch
	st.srv, st.tenant, st.bind, st.epoch = b.Server, b.TenantID, b.Binding, b.PolicyEpoch
	return outcome{}, true
}

// bindingFault turns an error of [registryclient.Registry.Binding] into the
// run's end.
func (st *scanState) bindingFault(err error) outcome {
	if errors.Is(err, registryclient.ErrNotFound) {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED, "%v: it is no longer registered", err)
	}
	return st.registryFault(fmt.Sprintf("server %s as audience class %s", st.args.ServerID, st.args.AudienceClass), err)
}

// connect is steps 2 and 3: the credential (only in memory), the session,
// the first-use pin and the trust configuration.
func (st *scanState) connect() (outcome, bool) {
	s, ctx, a := st.s, st.ctx, st.args
	credential, err := s.cfg.Secrets.Resolve(st.bind.GetSecretRef(), s.cfg.LookupEnv)
	if err != nil {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_CREDENTIAL_UNAVAILABLE, "%v", err), false
	}
	target, err := targetOf(st.srv, credential)
	if err != nil {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR, "%v", err), false
	}
	st.opts = s.cfg.Crawl
	st.opts.Versioned = st.srv.GetRevisionSource() == registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED
	sess, f := crawl.Open(ctx, target, st.opts)
	if f != nil {
		if ctx.Err() != nil {
			return st.cancelled(), false
		}
		return st.fail(f.State, f.Reason, "%s", f.Detail), false
	}
	st.sess = sess
	st.end.ProtocolVersion, st.end.IdentityDigest = sess.ProtocolVersion(), sess.IdentityDigest()
	if st.srv.GetIdentityPin() == "" {
		pinned, err := s.pin(ctx, st.srv, sess.IdentityDigest())
		if err != nil {
			if errors.Is(err, errPinChanged) {
				return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH, "%v", err), false
			}
			return st.registryFault("server "+a.ServerID, err), false
		}
		st.srv = pinned
	}
	st.trust = trustDigest(st.srv, a.AudienceClass, st.bind)
	st.end.TrustConfigDigest = st.trust
	return outcome{}, true
}

// relistsBeforeFirstPage is how many times a scan lists again, on the same
// session, when a `notifications/tools/list_changed` arrived before the
// crawl had read any page ([startsOver]).
const relistsBeforeFirstPage = 2

// startsOver reports whether res ended on a list_changed read before any
// page was. Such a notification usually announces a change the session's
// own start made: a server that registers tools once it knows the client's
// capabilities (server-everything registers its conditional tools on
// notifications/initialized and announces them on the standalone stream,
// which is not ordered with the crawl's first request). A new session
// would bring the same notification again, so River's retries would never
// prove the catalog; listing again on this session, whose baseline is
// after the notification, proves it if nothing else changes. A
// notification after a page was read aborts the run (DESIGN §6, "rescan
// scheduled").
func startsOver(res *crawl.Result) bool {
	return res.State == stIncomplete && res.Reason == discoveryv1.RunReason_RUN_REASON_LIST_CHANGED && len(res.Pages) == 0
}

// crawl is step 4: crawl, and validate a whole catalog.
func (st *scanState) crawl() (*candidate.Candidate, outcome, bool) {
	s, ctx := st.s, st.ctx
	res := st.sess.Crawl(ctx)
	for i := 0; i < relistsBeforeFirstPage && startsOver(res) && ctx.Err() == nil; i++ {
		s.lg.InfoContext(ctx, "tools/list_changed arrived before the first page; listing again on the same session",
			"server", st.args.ServerID, "audience_class", st.args.AudienceClass, "run", st.runID, "relist", i+1)
		s.metrics.relists.Inc()
		res = st.sess.Crawl(ctx)
	}
	st.end.SourceRevision, st.end.ClosingRevision = res.Revision, res.ClosingRevision
	st.end.PageRoot, st.end.Pages, st.end.ToolCount, st.end.Bytes = res.PageRoot, res.Pages, len(res.Tools), res.Bytes
	st.end.CacheScope = res.CacheScope
	if !res.Whole() {
		if ctx.Err() != nil {
			return nil, st.cancelled(), false
		}
		return nil, st.fail(res.State, res.Reason, "%s", res.Detail), false
	}
	st.decided = st.sess.ListChangedCount()
	if len(res.Tools) >= validatingRecordThreshold {
		// Validating a small catalog takes microseconds; recording the
		// transient state is worth a round trip only for large ones.
		_ = s.store.UpdateRun(ctx, st.runID, stValidating)
	}
	cand := candidate.Assess(res, s.cfg.Limits)
	st.end.Flags = cand.Flags
	if !cand.Committable() {
		return nil, st.fail(cand.State, cand.Reason, "%s", cand.Detail), false
	}
	if len(res.Tools) >= validatingRecordThreshold {
		_ = s.store.UpdateRun(ctx, st.runID, cand.State)
	}
	return cand, outcome{}, true
}

// commit is step 6: the pointer CAS, or a refresh of an unchanged active
// generation.
func (st *scanState) commit(cand *candidate.Candidate) outcome {
	s, ctx, a, res, view := st.s, st.ctx, st.args, cand.Crawl, st.view
	revision := ""
	if st.opts.Versioned {
		revision = res.Revision
	}
	st.end.State = cand.State
	freshUntil := st.started.Add(s.cfg.SnapshotTTL)
	if view.Active && view.SourceRevision == revision && view.PageRoot == res.PageRoot &&
		view.IdentityDigest == res.IdentityDigest && view.TrustConfigDigest == st.trust {
		st.end.Detail = fmt.Sprintf("same source revision and page root as generation %d; its freshness was extended", view.Expected.Generation)
		tools := func() []comparison.Tool {
			out := make([]comparison.Tool, len(cand.Tools))
			for i, t := range cand.Tools {
				out[i] = comparison.Tool{Name: t.Derived.Name, DescriptorDigest: t.Crawled.Digest, InputSchemaDigest: t.Derived.InputSchemaDigest}
			}
			return out
		}
		if _, err := s.store.Refresh(ctx, st.runID, a.ServerID, a.AudienceClass, view.Expected, freshUntil, st.epoch, st.end, tools, st.jobID, nil); err != nil {
			return st.commitFault(err)
		}
		s.afterCommit(st)
		return outcome{done, discoveryv1.RunReason_RUN_REASON_UNCHANGED}
	}
	snap := buildSnapshot(st.srv, a.AudienceClass, st.tenant, cand, st, st.epoch, revision, st.trust, freshUntil)
	committed := cand.State
	if committed == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN {
		committed = stEligible
	}
	if _, err := s.store.Commit(ctx, store.Commit{RunID: st.runID, Expected: view.Expected, Snapshot: snap, State: committed, Run: st.end, JobID: st.jobID}); err != nil {
		return st.commitFault(err)
	}
	s.afterCommit(st)
	return outcome{done, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED}
}

// commitFault ends a run whose commit (or refresh) failed.
func (st *scanState) commitFault(err error) outcome {
	if errors.Is(err, store.ErrCASConflict) {
		st.end.Generation = 0
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_CAS_CONFLICT, "the pointer moved since the scan started; this candidate lost the compare-and-swap")
	}
	if st.ctx.Err() != nil {
		return st.cancelled()
	}
	return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR, "commit failed: %v", err)
}

// recheck re-reads what the scan started from, right before the commit: one
// registry read, started after the crawl ended, of the server, the class's
// binding and the tenant's epoch in one snapshot.
func (st *scanState) recheck(srv *registryv1.Server, trust string, epoch int64) (outcome, bool) {
	s, ctx, a := st.s, st.ctx, st.args
	b, err := s.reg.Binding(ctx, a.ServerID, a.AudienceClass)
	if err != nil {
		return st.bindingFault(err), false
	}
	if b.PolicyEpoch != epoch {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_POLICY_EPOCH_CHANGED,
			"tenant %s's policy epoch moved from %d to %d during the scan", st.end.TenantID, epoch, b.PolicyEpoch), false
	}
	srv2 := b.Server
	if srv2.GetIdentityPin() != srv.GetIdentityPin() && srv2.GetIdentityPin() != st.end.IdentityDigest {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_IDENTITY_MISMATCH,
			"the server's identity pin changed during the scan to %s; the scan observed %s", srv2.GetIdentityPin(), st.end.IdentityDigest), false
	}
	bind2 := b.Binding
	if bind2 == nil {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED, "audience class %s no longer covers server %s", a.AudienceClass, a.ServerID), false
	}
	if d := trustDigest(srv2, a.AudienceClass, bind2); d != trust {
		return st.fail(stIncomplete, discoveryv1.RunReason_RUN_REASON_TRUST_CONFIG_CHANGED,
			"the trust configuration changed during the scan (%s, was %s)", d, trust), false
	}
	return outcome{}, true
}

var errPinChanged = errors.New("the server was pinned to another identity meanwhile")

// pin sets an empty identity pin to the observed identity (trust on first
// use). When another scan pinned first, the new pin must be ours.
func (s *Scanner) pin(ctx context.Context, srv *registryv1.Server, observed string) (*registryv1.Server, error) {
	pinned, err := s.reg.PinIdentity(ctx, srv, observed)
	if err == nil {
		return pinned, nil
	}
	if !errors.Is(err, registryclient.ErrConflict) {
		return nil, err
	}
	again, err := s.reg.Server(ctx, srv.GetServerId())
	if err != nil {
		return nil, err
	}
	switch again.GetIdentityPin() {
	case observed:
		return again, nil
	case "":
		return nil, fmt.Errorf("%w: the server changed before it could be pinned", registryclient.ErrUnavailable)
	}
	return nil, fmt.Errorf("%w: pinned %s, observed %s", errPinChanged, again.GetIdentityPin(), observed)
}

// targetOf builds the crawl target of a server.
func targetOf(srv *registryv1.Server, credential string) (crawl.Target, error) {
	t := crawl.Target{Pin: srv.GetIdentityPin(), Credential: credential}
	switch {
	case srv.GetStreamableHttp() != nil:
		t.URL = srv.GetStreamableHttp().GetUrl()
	case srv.GetStdio() != nil:
		t.Command, t.Args, t.PinDir = srv.GetStdio().GetCommand(), srv.GetStdio().GetArgs(), srv.GetStdio().GetPinDir()
	default:
		return t, fmt.Errorf("server %s has no transport", srv.GetServerId())
	}
	return t, nil
}

// trustDigest is `sha256:<hex>` of the canonical JSON of what the scan
// trusts: the server's transport, trust level, identity pin and revision
// source, and the audience class's binding for it (class name and secret
// reference, never the secret). Versions are left out: an edit of an
// unrelated field must not refuse a commit.
func trustDigest(srv *registryv1.Server, audienceClass string, b *registryv1.AudienceServer) string {
	in := struct {
		ServerID       string   `json:"server_id"`
		URL            string   `json:"url,omitempty"`
		Command        string   `json:"command,omitempty"`
		Args           []string `json:"args,omitempty"`
		PinDir         string   `json:"pin_dir,omitempty"`
		TrustLevel     string   `json:"trust_level"`
		IdentityPin    string   `json:"identity_pin"`
		RevisionSource string   `json:"revision_source"`
		AudienceClass  string   `json:"audience_class"`
		SecretRef      string   `json:"secret_ref"`
	}{
		ServerID: srv.GetServerId(), URL: srv.GetStreamableHttp().GetUrl(), Command: srv.GetStdio().GetCommand(),
		Args: srv.GetStdio().GetArgs(), PinDir: srv.GetStdio().GetPinDir(), TrustLevel: srv.GetTrustLevel().String(), IdentityPin: srv.GetIdentityPin(),
		RevisionSource: srv.GetRevisionSource().String(), AudienceClass: audienceClass, SecretRef: b.GetSecretRef(),
	}
	d, err := canonical.DigestValue(in)
	if err != nil {
		panic(err) // plain strings always encode
	}
	return d
}

// buildSnapshot makes the snapshot a commit writes.
func buildSnapshot(srv *registryv1.Server, audienceClass, tenant string, cand *candidate.Candidate, st *scanState,
	epoch int64, revision, trust string, expires time.Time) *catalogv1.Snapshot {
	res := cand.Crawl
	snap := &catalogv1.Snapshot{
		Schema: "toolCatalogSnapshot.v1", ServerId: srv.GetServerId(), IdentityDigest: res.IdentityDigest,
		EndpointDigest: res.EndpointDigest, ProtocolVersion: res.ProtocolVersion, AudienceClass: audienceClass,
		Tenant: tenant, DiscoveryStartedAt: timestamppb.New(st.started), ExpiresAt: timestamppb.New(expires),
		PolicyEpoch: epoch, SourceRevision: revision, PageRoot: res.PageRoot, CacheScope: res.CacheScope,
		TrustConfigDigest: trust, Tools: make([]*catalogv1.ToolDescriptor, len(cand.Tools)),
	}
	for _, p := range res.Pages {
		snap.PageDigests = append(snap.PageDigests, p.Digest)
	}
	for i, t := range cand.Tools {
		snap.Tools[i] = &catalogv1.ToolDescriptor{
			ToolId: srv.GetServerId() + "." + t.Derived.Name, Name: t.Derived.Name, Title: t.Derived.Title,
			Description: t.Derived.Description, DescriptorDigest: t.Crawled.Digest, InputSchemaDigest: t.Derived.InputSchemaDigest,
			OutputSchemaDigest: t.Derived.OutputSchemaDigest, Raw: t.Crawled.Raw, Annotations: t.Derived.Annotations,
			Flags: t.Derived.Flags, SchemaDialect: t.Derived.Dialect,
		}
	}
	return snap
}
