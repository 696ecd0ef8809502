package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
)

// registryFileVersion is the only version of the registry file format.
const registryFileVersion = 1

// registryFile is `toolcrib apply -f`'s file (seed 004: a small team starts
// from one versioned registry file reviewed in CI). Unknown keys are
// refused. `toolcrib export` writes the same format.
type registryFile struct {
	Version         int             `yaml:"version"`
	Tenants         []tenantEntry   `yaml:"tenants,omitempty"`
	Servers         []serverEntry   `yaml:"servers,omitempty"`
	AudienceClasses []classEntry    `yaml:"audience_classes,omitempty"`
	Grants          []grantEntry    `yaml:"grants,omitempty"`
	Contracts       []contractEntry `yaml:"contracts,omitempty"`
	Rollout         []rolloutEntry  `yaml:"rollout,omitempty"`
}

// tenantEntry is a tenant. The registry cannot read a tenant's display
// name back, so it is set only when apply creates the tenant.
type tenantEntry struct {
	ID          string `yaml:"id"`
	DisplayName string `yaml:"display_name,omitempty"`
}

type serverEntry struct {
	ID             string   `yaml:"id"`
	DisplayName    string   `yaml:"display_name,omitempty"`
	Description    string   `yaml:"description,omitempty"`
	Owner          string   `yaml:"owner"`
	URL            string   `yaml:"url,omitempty"`
	Command        string   `yaml:"command,omitempty"`
	Args           []string `yaml:"args,omitempty"`
	PinDir         string   `yaml:"pin_dir,omitempty"`
	Trust          string   `yaml:"trust"`
	RevisionSource string   `yaml:"revision_source,omitempty"`
	// IdentityPin empty keeps the pin the registry has (discovery pins on
	// first use); apply never clears a pin.
	IdentityPin  string `yaml:"identity_pin,omitempty"`
	ScanInterval string `yaml:"scan_interval,omitempty"`
}

type classEntry struct {
	Name        string        `yaml:"name"`
	Description string        `yaml:"description,omitempty"`
	Servers     []classServer `yaml:"servers,omitempty"`
}

type classServer struct {
	Server    string `yaml:"server"`
	SecretRef string `yaml:"secret_ref,omitempty"`
}

// grantEntry is the whole grant of one subject or group: apply adds what
// is missing and revokes what is not listed.
type grantEntry struct {
	Tenant          string   `yaml:"tenant"`
	Subject         string   `yaml:"subject,omitempty"`
	Group           string   `yaml:"group,omitempty"`
	Scopes          []string `yaml:"scopes,omitempty"`
	AudienceClasses []string `yaml:"audience_classes,omitempty"`
	// Condition is the grant's CEL condition; empty for none (apply then
	// clears one the registry holds).
	Condition string `yaml:"condition,omitempty"`
}

// contractEntry is a tool's contract, whether it is enabled (unset leaves
// it), and the approval digests a reviewer pinned: apply approves exactly
// those that are current, and reports the others.
type contractEntry struct {
	contractFile `yaml:",inline"`
	Enabled      *bool    `yaml:"enabled,omitempty"`
	Approved     []string `yaml:"approved,omitempty"`
}

type rolloutEntry struct {
	Server        string   `yaml:"server"`
	AudienceClass string   `yaml:"audience_class"`
	Stage         string   `yaml:"stage"`
	Percent       *int32   `yaml:"percent,omitempty"`
	Effects       []string `yaml:"effects,omitempty"`
	Reason        string   `yaml:"reason"`
}

// maxRegistryFile bounds the size of a registry file.
const maxRegistryFile = 8 << 20

func readRegistryFile(path string) (*registryFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parseRegistryFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// parseRegistryFile decodes one YAML document; unknown keys and a second
// document are refused.
func parseRegistryFile(b []byte) (*registryFile, error) {
	if len(b) > maxRegistryFile {
		return nil, fmt.Errorf("larger than %d bytes", maxRegistryFile)
	}
	var f registryFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	return &f, nil
}

// state is what the registry holds of everything a registry file names.
type state struct {
	servers  map[string]*registryv1.Server
	classes  map[string]*registryv1.AudienceClass
	tenants  map[string]*registryv1.Policy
	tools    map[string]*registryv1.Tool
	stages   map[string]*registryv1.RolloutStage
	order    struct{ servers, classes, tools, stages []string }
	revision int64
}

func pairKey(server, class string) string { return class + " " + server }

// readState lists servers, classes, tools and stages, and reads the policy
// of every tenant in tenants and of every tenant owning a class.
func readState(ctx context.Context, e *env, tenants []string) (*state, error) {
	s := &state{servers: map[string]*registryv1.Server{}, classes: map[string]*registryv1.AudienceClass{},
		tenants: map[string]*registryv1.Policy{}, tools: map[string]*registryv1.Tool{}, stages: map[string]*registryv1.RolloutStage{}}
	for token := ""; ; {
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListServersResponse, error) {
			return c.ListServers(ctx, &registryv1.ListServersRequest{PageSize: 1000, PageToken: token})
		})
		if err != nil {
			return nil, err
		}
		for _, srv := range resp.GetServers() {
			s.servers[srv.GetServerId()] = srv
			s.order.servers = append(s.order.servers, srv.GetServerId())
		}
		if s.revision == 0 {
			s.revision = resp.GetRevision()
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	for token := ""; ; {
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListAudienceClassesResponse, error) {
			return c.ListAudienceClasses(ctx, &registryv1.ListAudienceClassesRequest{PageSize: 1000, PageToken: token})
		})
		if err != nil {
			return nil, err
		}
		for _, ac := range resp.GetAudienceClasses() {
			s.classes[ac.GetName()] = ac
			s.order.classes = append(s.order.classes, ac.GetName())
			tenants = append(tenants, ac.GetTenantId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	for token := ""; ; {
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.ListToolsResponse, error) {
			return c.ListTools(ctx, &registryv1.ListToolsRequest{PageSize: 1000, PageToken: token})
		})
		if err != nil {
			return nil, err
		}
		for _, t := range resp.GetTools() {
			s.tools[t.GetToolId()] = t
			s.order.tools = append(s.order.tools, t.GetToolId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	stages, err := listStages(ctx, e, &registryv1.ListRolloutStagesRequest{})
	if err != nil {
		return nil, err
	}
	for _, st := range stages {
		k := pairKey(st.GetServerId(), st.GetAudienceClass())
		s.stages[k] = st
		s.order.stages = append(s.order.stages, k)
	}
	slices.Sort(tenants)
	for _, t := range slices.Compact(tenants) {
		if !ids.ValidTenantID(t) {
			continue
		}
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetPolicyResponse, error) {
			return c.GetPolicy(ctx, &registryv1.GetPolicyRequest{TenantId: t})
		})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.tenants[t] = resp.GetPolicy()
	}
	return s, nil
}

// step is one change of a plan.
type step struct {
	// line is what the plan shows: `+ server x`, `~ grant …: …`, `- …`.
	line string
	do   func(ctx context.Context, c registryv1.RegistryServiceClient) error
}

// plan is what apply would do; notes are findings that change nothing
// (pinned digests that are not current, things that cannot be pruned).
type plan struct {
	steps []step
	notes []string
	// approvals are evaluated again after the contracts are published.
	pins []pin
}

type pin struct {
	tool, digest string
	publishing   bool
}

func (p *plan) add(line string, do func(ctx context.Context, c registryv1.RegistryServiceClient) error) {
	p.steps = append(p.steps, step{line: line, do: do})
}

// problems collects every invalid entry of a file.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// desired is a file turned into the registry's messages, checked whole.
type desired struct {
	tenants   []tenantEntry
	servers   []*registryv1.Server
	classes   []*registryv1.AudienceClass
	grants    []*registryv1.Grant
	contracts []desiredContract
	stages    []*registryv1.SetRolloutStageRequest
}

type desiredContract struct {
	contract *registryv1.ToolContract
	enabled  *bool
	approved []string
}

// check validates f against itself and the registry's state, and returns
// what it asks for; any problem refuses the whole file.
func check(f *registryFile, st *state, prune bool) (*desired, error) {
	var (
		bad problems
		d   = &desired{}
	)
	if f.Version != registryFileVersion {
		bad.add("version: must be %d", registryFileVersion)
	}
	checkTexts(&bad, f)
	tenants := map[string]bool{}
	for t := range st.tenants {
		tenants[t] = true
	}
	seen := map[string]bool{}
	dup := func(kind, id string) bool {
		k := kind + " " + id
		if seen[k] {
			bad.add("%s %q: listed twice", kind, id)
			return true
		}
		seen[k] = true
		return false
	}
	for i, t := range f.Tenants {
		if !ids.ValidTenantID(t.ID) {
			bad.add("tenants[%d].id %q: must match %s", i, t.ID, ids.TenantIDPattern)
			continue
		}
		if !dup("tenant", t.ID) {
			tenants[t.ID] = true
			d.tenants = append(d.tenants, t)
		}
	}
	servers := map[string]bool{}
	for id := range st.servers {
		servers[id] = !prune
	}
	for i, s := range f.Servers {
		at := fmt.Sprintf("servers[%d]", i)
		srv, err := s.toProto()
		if err != nil {
			bad.add("%s (%s): %v", at, s.ID, err)
			continue
		}
		if !dup("server", s.ID) {
			servers[s.ID] = true
			d.servers = append(d.servers, srv)
		}
	}
	classes := map[string]string{}
	for name, ac := range st.classes {
		classes[name] = ac.GetTenantId()
	}
	inFile := map[string]bool{}
	for i, c := range f.AudienceClasses {
		at := fmt.Sprintf("audience_classes[%d] (%s)", i, c.Name)
		if !ids.ValidClass(c.Name) {
			bad.add("%s: name must be <tenant_id>.<class>: lowercase letters, digits, - and _", at)
			continue
		}
		tenant := strings.SplitN(c.Name, ".", 2)[0]
		if !tenants[tenant] {
			bad.add("%s: tenant %q is neither in the file nor in the registry", at, tenant)
		}
		ac := &registryv1.AudienceClass{Name: c.Name, TenantId: tenant, Description: c.Description}
		for j, cs := range c.Servers {
			if !servers[cs.Server] {
				bad.add("%s.servers[%d]: server %q is neither in the file nor in the registry", at, j, cs.Server)
			}
			if cs.SecretRef != "" && !strings.HasPrefix(cs.SecretRef, "env:") && !strings.HasPrefix(cs.SecretRef, "file:/") {
				bad.add("%s.servers[%d].secret_ref: must be env:NAME or file:/path", at, j)
			}
			ac.Servers = append(ac.Servers, &registryv1.AudienceServer{ServerId: cs.Server, SecretRef: cs.SecretRef})
		}
		if !dup("audience class", c.Name) {
			classes[c.Name] = tenant
			inFile[c.Name] = true
			d.classes = append(d.classes, ac)
		}
	}
	if prune {
		// A class the file does not list keeps its servers; a server pruned
		// from under it would be refused by the registry (SERVER_IN_USE).
		for name, ac := range st.classes {
			if inFile[name] {
				continue
			}
			for _, s := range ac.GetServers() {
				if !servers[s.GetServerId()] {
					bad.add("--prune would delete server %q, which audience class %q (not in the file, and not deletable) still covers", s.GetServerId(), name)
				}
			}
		}
	}
	for i, g := range f.Grants {
		at := fmt.Sprintf("grants[%d]", i)
		if !tenants[g.Tenant] {
			bad.add("%s: tenant %q is neither in the file nor in the registry", at, g.Tenant)
		}
		if (g.Subject == "") == (g.Group == "") {
			bad.add("%s: exactly one of subject and group", at)
		}
		if len(g.Scopes) == 0 && len(g.AudienceClasses) == 0 {
			bad.add("%s: no scopes and no audience classes (leave the grant out, with --prune, to revoke it)", at)
		}
		if g.Condition != "" {
			if _, cerr := condition.Compile(g.Condition); cerr != nil {
				bad.add("%s.condition: %s", at, cerr.Error())
			}
		}
		for j, c := range g.AudienceClasses {
			if classes[c] != g.Tenant {
				bad.add("%s.audience_classes[%d]: %q is not an audience class of tenant %q", at, j, c, g.Tenant)
			}
		}
		if !dup("grant", grantID(g.Tenant, g.Subject, g.Group)) {
			d.grants = append(d.grants, &registryv1.Grant{TenantId: g.Tenant, Subject: g.Subject, Group: g.Group,
				Scopes: sortedSet(g.Scopes), AudienceClasses: sortedSet(g.AudienceClasses), Condition: g.Condition})
		}
	}
	for i, c := range f.Contracts {
		at := fmt.Sprintf("contracts[%d] (%s)", i, c.ToolID)
		server, _, ok := ids.SplitToolID(c.ToolID)
		if !ok {
			bad.add("%s: tool_id must be <server_id>.<tool name>", at)
			continue
		}
		if st.tools[c.ToolID] == nil && !servers[server] {
			bad.add("%s: server %q is neither in the file nor in the registry", at, server)
		}
		ct, err := c.toProto(c.ToolID)
		if err != nil {
			bad.add("%s: %v", at, err)
			continue
		}
		for _, p := range contractProblems(ct, st.tools[c.ToolID]) {
			bad.add("%s: %s", at, p)
		}
		for j, dg := range c.Approved {
			if !canonical.ValidDigest(dg) {
				bad.add("%s.approved[%d]: not a sha256:<hex> approval digest", at, j)
			}
		}
		if !dup("contract", c.ToolID) {
			d.contracts = append(d.contracts, desiredContract{contract: ct, enabled: c.Enabled, approved: c.Approved})
		}
	}
	for i, r := range f.Rollout {
		at := fmt.Sprintf("rollout[%d] (%s/%s)", i, r.AudienceClass, r.Server)
		req, err := r.toProto()
		if err != nil {
			bad.add("%s: %v", at, err)
			continue
		}
		if !servers[r.Server] {
			bad.add("%s: server %q is neither in the file nor in the registry", at, r.Server)
		}
		if _, ok := classes[r.AudienceClass]; !ok {
			bad.add("%s: audience class %q is neither in the file nor in the registry", at, r.AudienceClass)
		}
		if !dup("rollout", pairKey(r.Server, r.AudienceClass)) {
			d.stages = append(d.stages, req)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("the registry file has %d problem(s); nothing was written:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	return d, nil
}

// checkTexts refuses control characters (and, in one-line fields, newline
// and tab) and bidirectional overrides in the file's free text, as the
// registry does, so that no write fails on them half way.
func checkTexts(bad *problems, f *registryFile) {
	line := func(at, v string) {
		if strings.ContainsFunc(v, func(r rune) bool { return unsafeRune(r, false) }) {
			bad.add("%s: contains a control character (newline, tab, escape, …) or a bidirectional override", at)
		}
	}
	text := func(at, v string) {
		if strings.ContainsFunc(v, func(r rune) bool { return unsafeRune(r, true) }) {
			bad.add("%s: contains a control character or a bidirectional override", at)
		}
	}
	for i, t := range f.Tenants {
		line(fmt.Sprintf("tenants[%d].display_name", i), t.DisplayName)
	}
	for i, s := range f.Servers {
		at := fmt.Sprintf("servers[%d]", i)
		line(at+".display_name", s.DisplayName)
		line(at+".owner", s.Owner)
		line(at+".command", s.Command)
		for j, a := range s.Args {
			line(fmt.Sprintf("%s.args[%d]", at, j), a)
		}
		text(at+".description", s.Description)
	}
	for i, c := range f.AudienceClasses {
		text(fmt.Sprintf("audience_classes[%d].description", i), c.Description)
	}
	for i, g := range f.Grants {
		line(fmt.Sprintf("grants[%d].subject", i), g.Subject)
		line(fmt.Sprintf("grants[%d].group", i), g.Group)
		for j, sc := range g.Scopes {
			line(fmt.Sprintf("grants[%d].scopes[%d]", i, j), sc)
		}
	}
	for i, c := range f.Contracts {
		line(fmt.Sprintf("contracts[%d].scope", i), c.Scope)
	}
	for i, r := range f.Rollout {
		text(fmt.Sprintf("rollout[%d].reason", i), r.Reason)
	}
}

func grantID(tenant, subject, group string) string {
	if group != "" {
		return tenant + "/group:" + group
	}
	return tenant + "/user:" + subject
}

func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func (s serverEntry) toProto() (*registryv1.Server, error) {
	if !ids.ValidServerID(s.ID) {
		return nil, fmt.Errorf("id must match %s", ids.ServerIDPattern)
	}
	if _, err := principal.ParseOwner(s.Owner); err != nil {
		return nil, fmt.Errorf("owner must be %s", principal.OwnerSyntax)
	}
	out := &registryv1.Server{ServerId: s.ID, DisplayName: s.DisplayName, Description: s.Description, Owner: s.Owner, IdentityPin: s.IdentityPin}
	switch {
	case (s.URL == "") == (s.Command == ""):
		return nil, errors.New("exactly one of url and command")
	case s.URL != "":
		if len(s.Args) > 0 || s.PinDir != "" {
			return nil, errors.New("args and pin_dir are for a command, not a url")
		}
		if u, err := url.Parse(s.URL); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname()))) {
			return nil, errors.New("url must be https:// (or http:// to loopback)")
		}
		out.Transport = &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: s.URL}}
	default:
		out.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: s.Command, Args: s.Args, PinDir: s.PinDir}}
	}
	if s.Trust == "" {
		return nil, errors.New("trust: required: first-party, partner or third-party")
	}
	t, err := parseEnum("trust", s.Trust, "TRUST_LEVEL_", registryv1.TrustLevel_value)
	if err != nil {
		return nil, err
	}
	rsName := s.RevisionSource
	if rsName == "" {
		rsName = "server-provided"
	}
	rs, err := parseEnum("revision_source", rsName, "REVISION_SOURCE_", registryv1.RevisionSource_value)
	if err != nil {
		return nil, err
	}
	out.TrustLevel, out.RevisionSource = registryv1.TrustLevel(t), registryv1.RevisionSource(rs)
	if s.IdentityPin != "" && !canonical.ValidDigest(s.IdentityPin) {
		return nil, errors.New("identity_pin must be sha256:<hex>")
	}
	if s.ScanInterval != "" {
		d, err := time.ParseDuration(s.ScanInterval)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("scan_interval %q: not a duration such as 5m", s.ScanInterval)
		}
		if d > 0 {
			out.ScanInterval = durationpb.New(d)
		}
	}
	return out, nil
}

func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

func (r rolloutEntry) toProto() (*registryv1.SetRolloutStageRequest, error) {
	stage, err := parseStage(r.Stage)
	if err != nil {
		return nil, err
	}
	req := &registryv1.SetRolloutStageRequest{ServerId: r.Server, AudienceClass: r.AudienceClass, Stage: stage, Reason: r.Reason}
	if strings.TrimSpace(r.Reason) == "" {
		return nil, errors.New("reason: required (recorded in the stage's history)")
	}
	if stage != registryv1.Stage_STAGE_CANARY {
		if r.Percent != nil || len(r.Effects) > 0 {
			return nil, errors.New("percent and effects are for a canary stage only")
		}
		return req, nil
	}
	pct := int32(5)
	if r.Percent != nil {
		pct = *r.Percent
	}
	if pct < 0 || pct > 100 {
		return nil, fmt.Errorf("percent %d: must be 0..100", pct)
	}
	req.CanaryPercent = proto.Int32(pct)
	effects := r.Effects
	if len(effects) == 0 {
		effects = []string{"read-only"}
	}
	if req.CanaryEffects, err = parseEffects(effects); err != nil {
		return nil, err
	}
	slices.Sort(req.CanaryEffects)
	req.CanaryEffects = slices.Compact(req.CanaryEffects)
	return req, nil
}

// contractProblems are the registry's publish checks that need no more
// than the tool's descriptors: required fields, required evidence within
// the allowed fields, and no allowed-fields projection dropping a field a
// descriptor's outputSchema requires.
func contractProblems(c *registryv1.ToolContract, t *registryv1.Tool) []string {
	var out []string
	if c.GetEffect() == catalogv1.EffectClass_EFFECT_CLASS_UNSPECIFIED {
		out = append(out, "effect: required")
	}
	if c.GetScope() == "" {
		out = append(out, "scope: required")
	}
	if c.GetAuthorization() == registryv1.Authorization_AUTHORIZATION_UNSPECIFIED {
		out = append(out, "authorization: required")
	}
	allowed := c.GetAllowedFields()
	for _, f := range c.GetRequiredEvidence() {
		if len(allowed) > 0 && !slices.Contains(allowed, f) {
			out = append(out, fmt.Sprintf("required_evidence: %q is not in allowed_fields", f))
		}
	}
	if len(allowed) == 0 || t == nil {
		return out
	}
	for _, v := range t.GetVariants() {
		for _, f := range outputRequired(v.GetDescriptorRaw()) {
			if !slices.Contains(allowed, f) {
				out = append(out, fmt.Sprintf("allowed_fields: drops %q, which the outputSchema of %s's descriptor requires", f, v.GetAudienceClass()))
			}
		}
	}
	return out
}

// outputRequired returns outputSchema.required of a raw tool descriptor.
func outputRequired(raw []byte) []string {
	var d struct {
		OutputSchema struct {
			Required []string `json:"required"`
		} `json:"outputSchema"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return d.OutputSchema.Required
}
