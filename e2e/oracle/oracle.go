package oracle

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolcrib/toolcrib/e2e/fixture"
	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
)

var (
	// ErrUnfinished: the log ends before the scan's outcome is decided (no
	// request at all, a request never answered, no closing re-check).
	ErrUnfinished = errors.New("oracle: the scan did not finish")
	// ErrDeviation: the crawler sent a request the reference crawl would
	// not have sent (another cursor than the last `nextCursor`, a re-check
	// with a cursor, or a first request with one).
	ErrDeviation = errors.New("oracle: the crawl deviated from the reference crawl")
)

// Config is what the oracle needs besides the log: how the server is
// registered and the caps the crawler runs with (give the crawler the same).
type Config struct {
	// RevisionSource is the server's registered revision source:
	// SERVER_PROVIDED or NONE.
	RevisionSource registryv1.RevisionSource
	// Limits are the crawler's caps.
	Limits Limits
	// ConcurrentStreams says the transport carries one session over several
	// concurrent streams (streamable HTTP: a stream per request plus the
	// standalone SSE stream). Over such a transport a notification written
	// on a request's stream and a dropped connection seen first on another
	// stream are not ordered for the client, so both causes are correct
	// (see [Outcome.AlsoAllowed]). In-memory and stdio carry one ordered
	// stream: false.
	ConcurrentStreams bool
}

// Limits are a crawl's caps; zero means no cap.
type Limits struct {
	// MaxPages is the most walk pages (the re-check is not counted).
	MaxPages int
	// MaxTools is the most tools over all walk pages.
	MaxTools int
	// MaxBytes is the most bytes of `result` values over all walk pages.
	MaxBytes int64
	// MaxSchemaBytes is the longest canonical JSON of one input or output
	// schema.
	MaxSchemaBytes int
	// MaxToolBytes is the longest canonical JSON of one tool.
	MaxToolBytes int
	// MaxSchemaDepth is the deepest nesting of one schema.
	MaxSchemaDepth int
}

// Tool is one tool of an activated catalog.
type Tool struct {
	// Name is the MCP tool name.
	Name string
	// DescriptorDigest is `sha256:<hex>` of the RFC 8785 form of the tool
	// JSON exactly as served.
	DescriptorDigest string
	// JSON is the tool as served.
	JSON json.RawMessage
}

// Outcome is what a correct crawl of one scan ends with.
type Outcome struct {
	// State is SNAPSHOT_PROVEN, UNVERSIONED_OBSERVATION, INCOMPLETE or
	// QUARANTINED: what the scan itself establishes. A proven snapshot is
	// committed by the pointer CAS as ELIGIBLE ([Outcome.CommittedState]).
	State catalogv1.DiscoveryState
	// Reason is the one cause of INCOMPLETE or QUARANTINED; UNSPECIFIED
	// otherwise.
	Reason discoveryv1.RunReason
	// AlsoAllowed are other reasons a correct crawler may give for the same
	// State, when the log cannot order what the client saw. It is set in one
	// case only: over [Config.ConcurrentStreams], a list_changed followed by
	// a connection drop in the same exchange is LIST_CHANGED, or
	// TRANSPORT_ERROR when the client saw the drop on its standalone stream
	// first. The state (INCOMPLETE, nothing activated) is the same either
	// way. Empty otherwise: one reason is right.
	AlsoAllowed []discoveryv1.RunReason
	// Detail says what happened, for humans.
	Detail string
	// ProtocolVersion is the version the scan ran at.
	ProtocolVersion string
	// Revision is the source revision of page 1 when the server is
	// registered SERVER_PROVIDED and page 1 carried one; "" otherwise.
	Revision string
	// Requests is how many `tools/list` requests the reference crawl sent,
	// the one whose answer decided included; Pages how many walk pages it
	// read (answered with a page, re-check excluded).
	Requests, Pages int
	// DecidedAt is the fixture's number of the request whose answer decided
	// the outcome.
	DecidedAt int
	// Tools is the catalog to activate, in page order; nil unless
	// [Outcome.Activates].
	Tools []Tool
	// Whole reports that every walk page was cut from one catalog state
	// and that together they list all of it. A proven catalog that is not
	// whole comes from a server that lied (e.g. ended its list early); it
	// is still what a correct crawler activates.
	Whole bool
	// CacheScope is "private" when a walk page said `cacheScope: private`,
	// else "".
	CacheScope string
}

// Activates reports whether the scan's catalog becomes a generation:
// proven (ELIGIBLE) or unversioned (UNVERSIONED_OBSERVATION).
func (o Outcome) Activates() bool {
	return o.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN ||
		o.State == catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
}

// EligibleForAutonomousSideEffects reports whether the catalog may ever back
// an autonomous call with side effects: only a proven one (I3).
func (o Outcome) EligibleForAutonomousSideEffects() bool {
	return o.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
}

// CommittedState is the state of the generation once committed: ELIGIBLE
// for a proven scan, UNVERSIONED_OBSERVATION for an unversioned one, and
// State itself for a scan that commits nothing.
func (o Outcome) CommittedState() catalogv1.DiscoveryState {
	if o.State == catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN {
		return catalogv1.DiscoveryState_DISCOVERY_STATE_ELIGIBLE
	}
	return o.State
}

// ToolDigests returns the activated catalog as name → descriptor digest.
func (o Outcome) ToolDigests() map[string]string {
	if o.Tools == nil {
		return nil
	}
	m := make(map[string]string, len(o.Tools))
	for _, t := range o.Tools {
		m[t.Name] = t.DescriptorDigest
	}
	return m
}

// String gives the state and reason, e.g. `INCOMPLETE/LIST_CHANGED`.
func (o Outcome) String() string {
	s := o.State.String()
	if o.Reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		s += "/" + o.Reason.String()
	}
	return s
}

type exchange struct {
	req  fixture.Event
	resp *fixture.Event // page, error or crash; nil when unanswered
}

// Expect computes the outcome of the first scan in events: a fixture log,
// normally [fixture.Log.Since] a mark taken before the scan. Events after
// the request that decided are ignored.
func Expect(events []fixture.Event, cfg Config) (Outcome, error) {
	var versioned bool
	switch cfg.RevisionSource {
	case registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED:
		versioned = true
	case registryv1.RevisionSource_REVISION_SOURCE_NONE:
	default:
		return Outcome{}, fmt.Errorf("oracle: revision source %v is neither SERVER_PROVIDED nor NONE", cfg.RevisionSource)
	}
	states := map[int]fixture.Event{}
	byNumber := map[int]*exchange{}
	var exchanges []*exchange
	var notes, crashes []fixture.Event
	for _, e := range events {
		switch e.Kind {
		case fixture.EventState:
			states[e.State] = e
		case fixture.EventRequest:
			ex := &exchange{req: e}
			byNumber[e.Request] = ex
			exchanges = append(exchanges, ex)
		case fixture.EventPage, fixture.EventError, fixture.EventCrash:
			if e.Kind == fixture.EventCrash && e.Request == 0 {
				crashes = append(crashes, e)
				continue
			}
			if ex := byNumber[e.Request]; ex != nil && ex.resp == nil {
				ex.resp = &e
			}
		case fixture.EventNotification:
			if e.Code == 0 {
				notes = append(notes, e)
			}
		}
	}
	if len(exchanges) == 0 {
		return Outcome{}, fmt.Errorf("%w: no tools/list request in the log", ErrUnfinished)
	}

	w := walk{
		cfg:       cfg,
		versioned: versioned,
		states:    states,
		notes:     notes,
		crashes:   crashes,
		first:     exchanges[0].req,
		modern:    exchanges[0].req.ProtocolVersion >= fixture.Version20260728,
		seen:      map[string]bool{},
	}
	w.out.ProtocolVersion = w.first.ProtocolVersion
	if w.modern {
		w.seen[""] = true // the first request's cursor is a real one
	}
	for _, ex := range exchanges {
		done, err := w.step(ex)
		if err != nil || done {
			return w.out, err
		}
	}
	if w.recheck && !versioned {
		// Revision source NONE: the re-check may be skipped.
		return w.whole(), nil
	}
	return w.out, fmt.Errorf("%w: the log ends after request %d (%d walk pages read)", ErrUnfinished, w.out.DecidedAt, w.out.Pages)
}

// walk is the reference crawl's state.
type walk struct {
	cfg       Config
	versioned bool
	modern    bool
	states    map[int]fixture.Event
	notes     []fixture.Event
	crashes   []fixture.Event
	first     fixture.Event

	out        Outcome
	seen       map[string]bool
	expect     string // cursor of the next request
	recheck    bool   // the next request is the closing re-check
	tools      []fixture.Tool
	pageStates []int
	nTools     int
	nBytes     int64
}

func (w *walk) fault(state catalogv1.DiscoveryState, reason discoveryv1.RunReason, format string, args ...any) (bool, error) {
	w.out.State, w.out.Reason, w.out.Detail = state, reason, fmt.Sprintf(format, args...)
	return true, nil
}

func (w *walk) incomplete(reason discoveryv1.RunReason, format string, args ...any) (bool, error) {
	return w.fault(catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE, reason, format, args...)
}

// step judges one exchange; it reports whether the outcome is decided.
func (w *walk) step(ex *exchange) (bool, error) {
	r := ex.req
	if r.Cursor != w.expect {
		what := fmt.Sprintf("walk page %d", w.out.Pages+1)
		if w.recheck {
			what = "the closing re-check"
		}
		return true, fmt.Errorf("%w: request %d carried cursor %q; %s is asked for with cursor %q",
			ErrDeviation, r.Request, r.Cursor, what, w.expect)
	}
	resp := ex.resp
	if resp == nil {
		for _, c := range w.crashes {
			if c.Seq > r.Seq {
				resp = &c
				break
			}
		}
	}
	if resp == nil {
		return true, fmt.Errorf("%w: request %d was never answered", ErrUnfinished, r.Request)
	}
	w.out.Requests++
	w.out.DecidedAt = r.Request
	if n, ok := w.notificationBefore(resp.Seq); ok {
		if resp.Kind == fixture.EventCrash && w.cfg.ConcurrentStreams {
			w.out.AlsoAllowed = []discoveryv1.RunReason{discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR}
		}
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_LIST_CHANGED,
			"list_changed sent (event %d, on request %d's stream when not 0) before the answer to request %d",
			n.Seq, n.Request, r.Request)
	}
	switch resp.Kind {
	case fixture.EventError:
		if w.versioned && resp.Code == codeInvalidParams && !w.recheck && w.out.Pages > 0 {
			// DESIGN §6: a revision-bound cursor of an expired revision is
			// answered -32602; the revision moved between pages.
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH,
				"request %d: the server refused the cursor with JSON-RPC error %d: %s", r.Request, resp.Code, resp.Message)
		}
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR,
			"request %d answered JSON-RPC error %d: %s", r.Request, resp.Code, resp.Message)
	case fixture.EventCrash:
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_TRANSPORT_ERROR,
			"the connection dropped at request %d", r.Request)
	}
	p := resp
	if w.versioned {
		if !p.HasRevision {
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_REVISION_MISSING,
				"request %d: the page carries no revision", r.Request)
		}
		if !w.recheck && w.out.Pages == 0 {
			w.out.Revision = p.Revision
		} else if p.Revision != w.out.Revision {
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH,
				"request %d carries revision %q, page 1 carried %q", r.Request, p.Revision, w.out.Revision)
		}
	}
	if w.recheck {
		if why := w.recheckDiffers(p); why != "" {
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_REVISION_MISMATCH,
				"the closing re-check (request %d) %s", r.Request, why)
		}
		w.out = w.whole()
		return true, nil
	}
	w.out.Pages++
	hasNext := p.HasNext && (w.modern || p.NextCursor != "")
	if hasNext {
		if p.NextCursor == r.Cursor {
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_REPEATED_CURSOR,
				"page %d returned the cursor it was given, %q", w.out.Pages, p.NextCursor)
		}
		if w.seen[p.NextCursor] {
			return w.incomplete(discoveryv1.RunReason_RUN_REASON_CURSOR_CYCLE,
				"page %d returned cursor %q, sent earlier in the scan", w.out.Pages, p.NextCursor)
		}
	}
	w.nTools += len(p.Tools)
	w.nBytes += int64(p.Bytes)
	lim := w.cfg.Limits
	if lim.MaxTools > 0 && w.nTools > lim.MaxTools {
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_TOOL_CAP,
			"%d tools after page %d, cap %d", w.nTools, w.out.Pages, lim.MaxTools)
	}
	if lim.MaxBytes > 0 && w.nBytes > lim.MaxBytes {
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_BYTE_CAP,
			"%d bytes after page %d, cap %d", w.nBytes, w.out.Pages, lim.MaxBytes)
	}
	if hasNext && lim.MaxPages > 0 && w.out.Pages >= lim.MaxPages {
		return w.incomplete(discoveryv1.RunReason_RUN_REASON_PAGE_CAP,
			"page %d has a next page, cap %d pages", w.out.Pages, lim.MaxPages)
	}
	w.tools = append(w.tools, p.Tools...)
	w.pageStates = append(w.pageStates, p.State)
	if p.CacheScope == "private" {
		w.out.CacheScope = "private"
	}
	if hasNext {
		w.seen[p.NextCursor] = true
		w.expect = p.NextCursor
	} else {
		w.recheck, w.expect = true, ""
	}
	return false, nil
}

// recheckDiffers says how the closing re-check's page contradicts the
// walk's tools, "" when it does not.
func (w *walk) recheckDiffers(p *fixture.Event) string {
	hasNext := p.HasNext && (w.modern || p.NextCursor != "")
	n := len(p.Tools)
	switch {
	case n > len(w.tools):
		return fmt.Sprintf("lists %d tools, more than the %d of the whole walk", n, len(w.tools))
	case !hasNext && n != len(w.tools):
		return fmt.Sprintf("lists %d tools and no next page, the walk read %d", n, len(w.tools))
	case hasNext && n == len(w.tools):
		return fmt.Sprintf("lists all %d tools of the walk and a next page", n)
	}
	for i, t := range p.Tools {
		if !sameContent(t.JSON(), w.tools[i].JSON()) {
			return fmt.Sprintf("lists other content at position %d than the walk read", i)
		}
	}
	return ""
}

// sameContent compares two tools as RFC 8785 JSON, or byte for byte when
// either is not I-JSON.
func sameContent(a, b []byte) bool {
	ca, errA := canonical.Transform(a)
	cb, errB := canonical.Transform(b)
	if errA != nil || errB != nil {
		return errA != nil && errB != nil && string(a) == string(b)
	}
	return string(ca) == string(cb)
}

// codeInvalidParams is JSON-RPC's "invalid params" error code.
const codeInvalidParams = -32602

// notificationBefore returns the first list_changed sent to the scan's
// session after the scan began and before seq.
func (w *walk) notificationBefore(seq int64) (fixture.Event, bool) {
	for _, n := range w.notes {
		if n.Seq <= w.first.Seq || n.Seq >= seq {
			continue
		}
		if n.Session != "" && w.first.Session != "" && n.Session != w.first.Session {
			continue
		}
		return n, true
	}
	return fixture.Event{}, false
}

// whole returns the outcome of a whole scan before validation, with the
// tools to activate.
func (w *walk) whole() Outcome {
	out := w.out
	out.State = catalogv1.DiscoveryState_DISCOVERY_STATE_UNVERSIONED_OBSERVATION
	out.Detail = fmt.Sprintf("%d tools over %d pages, unversioned", len(w.tools), out.Pages)
	if w.versioned {
		out.State = catalogv1.DiscoveryState_DISCOVERY_STATE_SNAPSHOT_PROVEN
		out.Detail = fmt.Sprintf("%d tools over %d pages at revision %q", len(w.tools), out.Pages, out.Revision)
	}
	if reason, detail := validate(w.tools, w.cfg.Limits); reason != discoveryv1.RunReason_RUN_REASON_UNSPECIFIED {
		out.State, out.Reason, out.Detail = catalogv1.DiscoveryState_DISCOVERY_STATE_QUARANTINED, reason, detail
		return out
	}
	out.Tools = make([]Tool, len(w.tools))
	for i, t := range w.tools {
		digest, _ := canonical.Digest(t.JSON()) // validate refused every tool it cannot digest
		out.Tools[i] = Tool{Name: t.Name(), DescriptorDigest: digest, JSON: t.JSON()}
	}
	out.Whole = w.isWhole()
	return out
}

func (w *walk) isWhole() bool {
	if len(w.pageStates) == 0 {
		return false
	}
	n := w.pageStates[0]
	for _, s := range w.pageStates {
		if s != n {
			return false
		}
	}
	st, ok := w.states[n]
	if !ok || len(st.Tools) != len(w.tools) {
		return false
	}
	for i, t := range st.Tools {
		if string(t.JSON()) != string(w.tools[i].JSON()) {
			return false
		}
	}
	return true
}
