package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// applyReason is the reason apply gives a stage it resets when pruning.
const applyReason = "not in the registry file (toolcrib apply --prune)"

// makePlan compares what the file asks for with the registry's state, in
// the order apply writes: tenants, servers, rollout stages of classes that
// exist already (so a restrictive stage is in force before a class starts
// covering the server), audience classes, the remaining stages, grants,
// contracts, approvals, enable/disable, then with prune the deletions.
func makePlan(d *desired, st *state, prune bool) *plan {
	p := &plan{}
	for _, t := range d.tenants {
		if st.tenants[t.ID] != nil {
			continue
		}
		t := t
		p.add("+ tenant "+t.ID, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
			_, err := c.PutTenant(ctx, &registryv1.PutTenantRequest{Tenant: &registryv1.Tenant{TenantId: t.ID, DisplayName: t.DisplayName}})
			return err
		})
	}
	for _, want := range d.servers {
		cur := st.servers[want.GetServerId()]
		if cur == nil {
			p.add("+ server "+want.GetServerId(), func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.RegisterServer(ctx, &registryv1.RegisterServerRequest{Server: want})
				return err
			})
			continue
		}
		if want.GetIdentityPin() == "" {
			want.IdentityPin = cur.GetIdentityPin()
		}
		if !proto.Equal(comparableServer(cur), want) {
			version := cur.GetVersion()
			p.add("~ server "+want.GetServerId()+": "+serverDiff(comparableServer(cur), want), func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.UpdateServer(ctx, &registryv1.UpdateServerRequest{Server: want, ExpectedVersion: version})
				return err
			})
		}
	}
	var late []*registryv1.SetRolloutStageRequest
	for _, req := range d.stages {
		if st.classes[req.GetAudienceClass()] == nil || st.servers[req.GetServerId()] == nil {
			late = append(late, req)
			continue
		}
		stageStep(p, st, req)
	}
	restricted := map[string]bool{}
	for _, req := range late {
		if req.GetStage() != registryv1.Stage_STAGE_FULL {
			restricted[pairKey(req.GetServerId(), req.GetAudienceClass())] = true
		}
	}
	var widen []*registryv1.AudienceClass
	for _, want := range d.classes {
		cur := st.classes[want.GetName()]
		if cur == nil {
			// A new class is created without the servers that get a
			// restrictive stage, and covers them only once the stage is set:
			// it never covers them at FULL.
			first := proto.Clone(want).(*registryv1.AudienceClass)
			first.Servers = slices.DeleteFunc(first.Servers, func(s *registryv1.AudienceServer) bool {
				return restricted[pairKey(s.GetServerId(), want.GetName())]
			})
			if len(first.Servers) != len(want.GetServers()) {
				widen = append(widen, want)
			}
			p.add("+ audience class "+want.GetName()+" ("+classServers(first)+")", func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: first})
				return err
			})
			continue
		}
		if !proto.Equal(&registryv1.AudienceClass{Name: cur.GetName(), TenantId: cur.GetTenantId(), Description: cur.GetDescription(), Servers: cur.GetServers()}, want) {
			version := cur.GetVersion()
			p.add(fmt.Sprintf("~ audience class %s: servers %s → %s", want.GetName(), classServers(cur), classServers(want)),
				func(ctx context.Context, c registryv1.RegistryServiceClient) error {
					_, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: want, ExpectedVersion: version})
					return err
				})
		}
	}
	for _, req := range late {
		stageStep(p, st, req)
	}
	for _, want := range widen {
		p.add(fmt.Sprintf("~ audience class %s: servers %s, once their rollout stages are set", want.GetName(), classServers(want)),
			func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.PutAudienceClass(ctx, &registryv1.PutAudienceClassRequest{AudienceClass: want, ExpectedVersion: 1})
				return err
			})
	}
	for _, want := range d.grants {
		cur := findGrant(st.tenants[want.GetTenantId()], want.GetSubject(), want.GetGroup())
		grantSteps(p, cur, want)
	}
	for _, dc := range d.contracts {
		tool := st.tools[dc.contract.GetToolId()]
		if tool == nil {
			// A contract can only be published for a tool discovery has
			// committed: the first apply registers the server, a scan finds
			// the tool, a later apply publishes.
			p.notes = append(p.notes, "! contract "+dc.contract.GetToolId()+
				": discovery has not committed the tool yet; it is published by an apply after the server's first scan")
			continue
		}
		publishing := tool.GetContract() == nil || !proto.Equal(normalContract(tool.GetContract()), normalContract(dc.contract))
		if publishing {
			ct := dc.contract
			p.add("~ contract "+ct.GetToolId()+": publish a new version", func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.PublishContract(ctx, &registryv1.PublishContractRequest{Contract: ct})
				return err
			})
		}
		for _, dg := range dc.approved {
			p.pins = append(p.pins, pin{tool: dc.contract.GetToolId(), digest: dg, publishing: publishing})
		}
		if !publishing {
			pinSteps(p, tool, dc.approved)
		}
		if dc.enabled != nil && *dc.enabled != tool.GetEnabled() {
			id := dc.contract.GetToolId()
			if *dc.enabled {
				p.add("~ tool "+id+": enable", func(ctx context.Context, c registryv1.RegistryServiceClient) error {
					_, err := c.EnableTool(ctx, &registryv1.EnableToolRequest{ToolId: id})
					return err
				})
			} else {
				p.add("~ tool "+id+": disable", func(ctx context.Context, c registryv1.RegistryServiceClient) error {
					_, err := c.DisableTool(ctx, &registryv1.DisableToolRequest{ToolId: id, Reason: "disabled in the registry file"})
					return err
				})
			}
		}
	}
	if prune {
		pruneSteps(p, d, st)
	}
	return p
}

// comparableServer is cur without its output-only fields.
func comparableServer(cur *registryv1.Server) *registryv1.Server {
	c := proto.Clone(cur).(*registryv1.Server)
	c.Version, c.CreatedAt, c.UpdatedAt = 0, nil, nil
	if c.GetScanInterval().AsDuration() == 0 {
		c.ScanInterval = nil
	}
	return c
}

func serverDiff(cur, want *registryv1.Server) string {
	var out []string
	if cur.GetOwner() != want.GetOwner() {
		out = append(out, "owner "+cur.GetOwner()+" → "+want.GetOwner())
	}
	if transport(cur) != transport(want) {
		out = append(out, "transport "+transport(cur)+" → "+transport(want))
	}
	if cur.GetTrustLevel() != want.GetTrustLevel() {
		out = append(out, "trust "+enumName(cur.GetTrustLevel().String(), "TRUST_LEVEL_")+" → "+enumName(want.GetTrustLevel().String(), "TRUST_LEVEL_"))
	}
	if len(out) == 0 {
		return "other fields"
	}
	return strings.Join(out, ", ")
}

func stageStep(p *plan, st *state, req *registryv1.SetRolloutStageRequest) {
	cur := st.stages[pairKey(req.GetServerId(), req.GetAudienceClass())]
	if cur == nil {
		cur = &registryv1.RolloutStage{Stage: registryv1.Stage_STAGE_FULL, ServerId: req.GetServerId(), AudienceClass: req.GetAudienceClass()}
	}
	if cur.GetStage() == req.GetStage() && cur.GetCanaryPercent() == req.GetCanaryPercent() && slices.Equal(cur.GetCanaryEffects(), req.GetCanaryEffects()) {
		return
	}
	want := &registryv1.RolloutStage{Stage: req.GetStage(), CanaryPercent: req.GetCanaryPercent(), CanaryEffects: req.GetCanaryEffects(), Version: 1}
	p.add(fmt.Sprintf("~ rollout %s/%s: %s → %s", req.GetAudienceClass(), req.GetServerId(), stageText(cur), stageText(want)),
		func(ctx context.Context, c registryv1.RegistryServiceClient) error {
			_, err := c.SetRolloutStage(ctx, req)
			return err
		})
}

func findGrant(p *registryv1.Policy, subject, group string) *registryv1.Grant {
	for _, g := range p.GetGrants() {
		if g.GetSubject() == subject && g.GetGroup() == group {
			return g
		}
	}
	return nil
}

func grantSteps(p *plan, cur, want *registryv1.Grant) {
	id := grantID(want.GetTenantId(), want.GetSubject(), want.GetGroup())
	addScopes, addClasses := minusSet(want.GetScopes(), cur.GetScopes()), minusSet(want.GetAudienceClasses(), cur.GetAudienceClasses())
	delScopes, delClasses := minusSet(cur.GetScopes(), want.GetScopes()), minusSet(cur.GetAudienceClasses(), want.GetAudienceClasses())
	sign := "~"
	if cur == nil {
		sign = "+"
	}
	// A condition change rides on the step that adds scopes, so a grant is
	// never, even for a moment, wider than the file says (new scopes
	// without their condition); alone otherwise.
	condChanged := want.GetCondition() != cur.GetCondition()
	condReq := func(r *registryv1.GrantScopesRequest) {
		if condChanged {
			r.Condition, r.ClearCondition = want.GetCondition(), want.GetCondition() == ""
		}
	}
	condNote := ""
	if condChanged {
		condNote = ", set condition"
		if want.GetCondition() == "" {
			condNote = ", clear condition"
		}
	}
	if len(addScopes)+len(addClasses) > 0 {
		p.add(fmt.Sprintf("%s grant %s: add scopes [%s] classes [%s]%s", sign, id, strings.Join(addScopes, ","), strings.Join(addClasses, ","), condNote),
			func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				r := &registryv1.GrantScopesRequest{TenantId: want.GetTenantId(), Subject: want.GetSubject(),
					Group: want.GetGroup(), Scopes: addScopes, AudienceClasses: addClasses}
				condReq(r)
				_, err := c.GrantScopes(ctx, r)
				return err
			})
	} else if condChanged {
		p.add(fmt.Sprintf("~ grant %s:%s", id, strings.TrimPrefix(condNote, ",")),
			func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				r := &registryv1.GrantScopesRequest{TenantId: want.GetTenantId(), Subject: want.GetSubject(), Group: want.GetGroup()}
				condReq(r)
				_, err := c.GrantScopes(ctx, r)
				return err
			})
	}
	if len(delScopes)+len(delClasses) > 0 {
		p.add(fmt.Sprintf("~ grant %s: revoke scopes [%s] classes [%s]", id, strings.Join(delScopes, ","), strings.Join(delClasses, ",")),
			revokeStep(want.GetTenantId(), want.GetSubject(), want.GetGroup(), delScopes, delClasses))
	}
}

func revokeStep(tenant, subject, group string, scopes, classes []string) func(ctx context.Context, c registryv1.RegistryServiceClient) error {
	return func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		_, err := c.RevokeScopes(ctx, &registryv1.RevokeScopesRequest{TenantId: tenant, Subject: subject, Group: group,
			Scopes: scopes, AudienceClasses: classes})
		return err
	}
}

func minusSet(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// normalContract is c as the registry stores it: lists sorted, an empty
// classification `internal`, empty messages present.
func normalContract(c *registryv1.ToolContract) *registryv1.ToolContract {
	n := proto.Clone(c).(*registryv1.ToolContract)
	n.AllowedFields, n.RequiredEvidence = sortedSet(n.GetAllowedFields()), sortedSet(n.GetRequiredEvidence())
	if n.DownstreamMapping == nil {
		n.DownstreamMapping = &registryv1.DownstreamMapping{}
	}
	if n.DataPolicy == nil {
		n.DataPolicy = &registryv1.DataPolicy{}
	}
	if n.DataPolicy.Classification == "" {
		n.DataPolicy.Classification = "internal"
	}
	return n
}

// pinSteps approves each pinned digest that is a current approval digest
// of the tool and not approved yet, and notes every pinned digest that is
// not current. Nothing that is not pinned is approved.
func pinSteps(p *plan, tool *registryv1.Tool, pins []string) {
	current := map[string]bool{}
	approved := map[string]bool{}
	for _, v := range tool.GetVariants() {
		if d := v.GetApprovalDigest(); d != "" {
			current[d] = true
			approved[d] = approved[d] || v.GetReviewState() == registryv1.ReviewState_REVIEW_STATE_APPROVED
		}
	}
	for _, dg := range pins {
		switch {
		case !current[dg]:
			p.notes = append(p.notes, fmt.Sprintf("! tool %s: pinned approval digest %s is not current (current: %s); not approved",
				tool.GetToolId(), dg, orDash(strings.Join(slices.Sorted(mapsKeys(current)), ", "))))
		case !approved[dg]:
			id, digest := tool.GetToolId(), dg
			p.add("~ tool "+id+": approve pinned "+digest, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
				_, err := c.ApproveTool(ctx, &registryv1.ApproveToolRequest{ToolId: id, ApprovalDigest: digest, Comment: "pinned in the registry file"})
				return err
			})
		}
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// pruneSteps deletes what the file does not list: grants of the tenants
// it names, rollout stages of its classes (reset to FULL), and servers.
// Tenants, audience classes and contracts have no delete in the registry:
// they are noted, not deleted.
func pruneSteps(p *plan, d *desired, st *state) {
	keepGrant := map[string]bool{}
	for _, g := range d.grants {
		keepGrant[grantID(g.GetTenantId(), g.GetSubject(), g.GetGroup())] = true
	}
	named := map[string]bool{}
	for _, t := range d.tenants {
		named[t.ID] = true
	}
	for _, c := range d.classes {
		named[c.GetTenantId()] = true
	}
	for _, g := range d.grants {
		named[g.GetTenantId()] = true
	}
	for _, t := range slices.Sorted(mapsKeys(named)) {
		for _, g := range st.tenants[t].GetGrants() {
			id := grantID(g.GetTenantId(), g.GetSubject(), g.GetGroup())
			if !keepGrant[id] {
				p.add("- grant "+id, revokeStep(g.GetTenantId(), g.GetSubject(), g.GetGroup(), g.GetScopes(), g.GetAudienceClasses()))
			}
		}
	}
	keepStage := map[string]bool{}
	for _, s := range d.stages {
		keepStage[pairKey(s.GetServerId(), s.GetAudienceClass())] = true
	}
	keepServer := map[string]bool{}
	for _, s := range d.servers {
		keepServer[s.GetServerId()] = true
	}
	for _, k := range st.order.stages {
		cur := st.stages[k]
		if keepStage[k] || cur.GetVersion() == 0 || cur.GetStage() == registryv1.Stage_STAGE_FULL || !keepServer[cur.GetServerId()] {
			continue
		}
		req := &registryv1.SetRolloutStageRequest{ServerId: cur.GetServerId(), AudienceClass: cur.GetAudienceClass(),
			Stage: registryv1.Stage_STAGE_FULL, Reason: applyReason}
		stageStep(p, st, req)
	}
	for _, id := range st.order.servers {
		if keepServer[id] {
			continue
		}
		version := st.servers[id].GetVersion()
		p.add("- server "+id+" (with its tools, contracts and approvals)", func(ctx context.Context, c registryv1.RegistryServiceClient) error {
			_, err := c.DeleteServer(ctx, &registryv1.DeleteServerRequest{ServerId: id, ExpectedVersion: version})
			return err
		})
	}
	keepClass := map[string]bool{}
	for _, c := range d.classes {
		keepClass[c.GetName()] = true
	}
	for _, name := range st.order.classes {
		if !keepClass[name] {
			p.notes = append(p.notes, "! audience class "+name+" is not in the file; the registry cannot delete audience classes, so it stays")
		}
	}
	for t := range st.tenants {
		if !named[t] {
			p.notes = append(p.notes, "! tenant "+t+" is not in the file; the registry cannot delete tenants, so it stays")
		}
	}
	slices.Sort(p.notes)
}

// loadPlan reads the file and the registry and makes the plan; an invalid
// file is refused whole.
func loadPlan(ctx context.Context, e *env, path string, prune bool) (*plan, *state, error) {
	f, err := readRegistryFile(path)
	if err != nil {
		return nil, nil, err
	}
	var tenants []string
	for _, t := range f.Tenants {
		tenants = append(tenants, t.ID)
	}
	for _, g := range f.Grants {
		tenants = append(tenants, g.Tenant)
	}
	for _, c := range f.AudienceClasses {
		tenants = append(tenants, strings.SplitN(c.Name, ".", 2)[0])
	}
	st, err := readState(ctx, e, tenants)
	if err != nil {
		return nil, nil, err
	}
	d, err := check(f, st, prune)
	if err != nil {
		return nil, nil, err
	}
	return makePlan(d, st, prune), st, nil
}

// planJSON is the plan as `--json` prints it.
type planJSON struct {
	Changes []string `json:"changes"`
	Notes   []string `json:"notes"`
}

func printPlan(e *env, p *plan) {
	if e.asJSON {
		out := planJSON{Changes: []string{}, Notes: slices.Clone(p.notes)}
		for _, s := range p.steps {
			out.Changes = append(out.Changes, s.line)
		}
		for _, pn := range p.pins {
			if pn.publishing {
				out.Notes = append(out.Notes, fmt.Sprintf("? tool %s: pinned approval digest %s is checked after the new contract is published", pn.tool, pn.digest))
			}
		}
		if out.Notes == nil {
			out.Notes = []string{}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
		return
	}
	if len(p.steps) == 0 {
		fmt.Fprintln(e.stdout, "no changes: the registry matches the file")
	}
	for _, s := range p.steps {
		fmt.Fprintln(e.stdout, s.line)
	}
	for _, pn := range p.pins {
		if pn.publishing {
			fmt.Fprintf(e.stdout, "? tool %s: pinned approval digest %s is checked after the new contract is published\n", pn.tool, pn.digest)
		}
	}
	for _, n := range p.notes {
		fmt.Fprintln(e.stdout, n)
	}
}

// registryFileFlags are the flags of `apply` and `diff`: the file (-f) and
// --prune.
func registryFileFlags(file *string, prune *bool) func(fs *pflag.FlagSet) {
	return func(fs *pflag.FlagSet) {
		fs.StringVarP(file, "file", "f", "", "the registry file (YAML; required)")
		fs.BoolVar(prune, "prune", false, "also delete what the file does not list: servers, grants of its tenants, rollout stages (reset to full)")
	}
}

func runSteps(ctx context.Context, e *env, steps []step) (int, error) {
	c, err := e.registryClient()
	if err != nil {
		return 0, err
	}
	for i, s := range steps {
		cctx, cancel := e.callCtx(ctx)
		err := s.do(cctx, c)
		cancel()
		if err != nil {
			return i, fmt.Errorf("%s: %w (%d of %d changes were applied before it)", s.line, err, i, len(steps))
		}
	}
	return len(steps), nil
}

func approvePinsAfterPublish(ctx context.Context, e *env, pins []pin) (int, error) {
	p := &plan{}
	byTool := map[string][]string{}
	var order []string
	for _, pn := range pins {
		if pn.publishing {
			if byTool[pn.tool] == nil {
				order = append(order, pn.tool)
			}
			byTool[pn.tool] = append(byTool[pn.tool], pn.digest)
		}
	}
	for _, id := range order {
		resp, err := callRegistry(ctx, e, func(ctx context.Context, c registryv1.RegistryServiceClient) (*registryv1.GetToolResponse, error) {
			return c.GetTool(ctx, &registryv1.GetToolRequest{ToolId: id})
		})
		if err != nil {
			return 0, err
		}
		pinSteps(p, resp.GetTool(), byTool[id])
	}
	if !e.asJSON {
		for _, s := range p.steps {
			fmt.Fprintln(e.stdout, s.line)
		}
		for _, n := range p.notes {
			fmt.Fprintln(e.stdout, n)
		}
	}
	return runSteps(ctx, e, p.steps)
}

// exportFile is the registry's state as a registry file: every server,
// the tenants that own an audience class, every class, the grants of those
// tenants, every published contract with its enabled state and the
// approved current digests pinned, and every stage ever set.
func exportFile(st *state) *registryFile {
	f := &registryFile{Version: registryFileVersion}
	for _, t := range slices.Sorted(func(yield func(string) bool) {
		for t := range st.tenants {
			if !yield(t) {
				return
			}
		}
	}) {
		f.Tenants = append(f.Tenants, tenantEntry{ID: t})
	}
	for _, id := range st.order.servers {
		s := st.servers[id]
		se := serverEntry{ID: id, DisplayName: s.GetDisplayName(), Description: s.GetDescription(), Owner: s.GetOwner(),
			Trust:          enumName(s.GetTrustLevel().String(), "TRUST_LEVEL_"),
			RevisionSource: enumName(s.GetRevisionSource().String(), "REVISION_SOURCE_"), IdentityPin: s.GetIdentityPin()}
		if std := s.GetStdio(); std != nil {
			se.Command, se.Args, se.PinDir = std.GetCommand(), std.GetArgs(), std.GetPinDir()
		} else {
			se.URL = s.GetStreamableHttp().GetUrl()
		}
		if d := s.GetScanInterval().AsDuration(); d > 0 {
			se.ScanInterval = d.String()
		}
		f.Servers = append(f.Servers, se)
	}
	for _, name := range st.order.classes {
		ac := st.classes[name]
		ce := classEntry{Name: name, Description: ac.GetDescription()}
		for _, s := range ac.GetServers() {
			ce.Servers = append(ce.Servers, classServer{Server: s.GetServerId(), SecretRef: s.GetSecretRef()})
		}
		f.AudienceClasses = append(f.AudienceClasses, ce)
	}
	for _, t := range f.Tenants {
		for _, g := range st.tenants[t.ID].GetGrants() {
			f.Grants = append(f.Grants, grantEntry{Tenant: g.GetTenantId(), Subject: g.GetSubject(), Group: g.GetGroup(),
				Scopes: g.GetScopes(), AudienceClasses: g.GetAudienceClasses(), Condition: g.GetCondition()})
		}
	}
	for _, id := range st.order.tools {
		t := st.tools[id]
		c := t.GetContract()
		if c == nil {
			continue
		}
		enabled := t.GetEnabled()
		ce := contractEntry{Enabled: &enabled, contractFile: contractFile{ToolID: id, Effect: effectName(c.GetEffect()), Scope: c.GetScope(),
			Authorization: enumName(c.GetAuthorization().String(), "AUTHORIZATION_"), DeadlineMS: c.GetDeadlineMs(),
			AllowedFields: c.GetAllowedFields(), RequiredEvidence: c.GetRequiredEvidence(), ResultBudgetBytes: c.GetResultBudgetBytes(),
			AllowSampling: c.GetAllowSampling()}}
		if c.GetConfirmation() != registryv1.Confirmation_CONFIRMATION_UNSPECIFIED {
			ce.Confirmation = enumName(c.GetConfirmation().String(), "CONFIRMATION_")
		}
		ce.DownstreamMapping.Destination = c.GetDownstreamMapping().GetDestination()
		ce.DownstreamMapping.Operation = c.GetDownstreamMapping().GetOperation()
		ce.DownstreamMapping.Identity = c.GetDownstreamMapping().GetIdentity()
		ce.DataPolicy.Classification = c.GetDataPolicy().GetClassification()
		ce.DataPolicy.PersonalData = c.GetDataPolicy().GetPersonalData()
		ce.DataPolicy.RetentionDays = c.GetDataPolicy().GetRetentionDays()
		for _, v := range t.GetVariants() {
			if v.GetReviewState() == registryv1.ReviewState_REVIEW_STATE_APPROVED && !slices.Contains(ce.Approved, v.GetApprovalDigest()) {
				ce.Approved = append(ce.Approved, v.GetApprovalDigest())
			}
		}
		slices.Sort(ce.Approved)
		f.Contracts = append(f.Contracts, ce)
	}
	for _, k := range st.order.stages {
		s := st.stages[k]
		if s.GetVersion() == 0 {
			continue
		}
		re := rolloutEntry{Server: s.GetServerId(), AudienceClass: s.GetAudienceClass(), Stage: stageName(s.GetStage()), Reason: s.GetReason()}
		if s.GetStage() == registryv1.Stage_STAGE_CANARY {
			pct := s.GetCanaryPercent()
			re.Percent = &pct
			for _, e := range s.GetCanaryEffects() {
				re.Effects = append(re.Effects, effectName(e))
			}
		}
		f.Rollout = append(f.Rollout, re)
	}
	return f
}

// exportCommand is `toolcrib export`.
func exportCommand(e *env) *cobra.Command {
	var out string
	return withFlags(&cobra.Command{
		Use:   "export",
		Short: "write the registry's servers, tenants, audience classes, grants, contracts, approvals and rollout stages as a registry file",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments"); err != nil {
				return err
			}
			st, err := readState(ctx, e, nil)
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(exportFile(st))
			if err != nil {
				return err
			}
			b = append([]byte(fmt.Sprintf("# toolcrib registry file, exported at registry revision %d\n", st.revision)), b...)
			if out != "" {
				return os.WriteFile(out, b, 0o600)
			}
			_, err = e.stdout.Write(b)
			return err
		},
	}, func(fs *pflag.FlagSet) {
		fs.StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	})
}

// diffCommand is `toolcrib diff`.
func diffCommand(e *env) *cobra.Command {
	var file string
	var prune bool
	return withFlags(&cobra.Command{
		Use:   "diff",
		Short: "show what `toolcrib apply -f` would change, without changing anything",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments (the file is -f)"); err != nil {
				return err
			}
			if file == "" {
				return fmt.Errorf("-f: required: the registry file")
			}
			p, _, err := loadPlan(ctx, e, file, prune)
			if err != nil {
				return err
			}
			printPlan(e, p)
			return nil
		},
	}, registryFileFlags(&file, &prune))
}

// applyCommand is `toolcrib apply`.
func applyCommand(e *env) *cobra.Command {
	var file string
	var prune bool
	return withFlags(&cobra.Command{
		Use: "apply",
		Short: "make the registry match a registry file (admin): servers, tenants, audience classes, grants, contracts, " +
			"pinned approvals and rollout stages; prints the plan, then applies it; an invalid file is refused whole",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			if err := needArgs(a, 0, "no arguments (the file is -f)"); err != nil {
				return err
			}
			if file == "" {
				return fmt.Errorf("-f: required: the registry file")
			}
			p, _, err := loadPlan(ctx, e, file, prune)
			if err != nil {
				return err
			}
			printPlan(e, p)
			n, err := runSteps(ctx, e, p.steps)
			if err != nil {
				return err
			}
			if len(p.pins) > 0 && slices.ContainsFunc(p.pins, func(pn pin) bool { return pn.publishing }) {
				// Contracts were published: approve the pins that are now
				// current, from a fresh read.
				m, err := approvePinsAfterPublish(ctx, e, p.pins)
				if err != nil {
					return err
				}
				n += m
			}
			if !e.asJSON {
				fmt.Fprintf(e.stdout, "applied %d change(s)\n", n)
			}
			return nil
		},
	}, registryFileFlags(&file, &prune))
}
