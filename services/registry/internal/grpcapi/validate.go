package grpcapi

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/condition"
	"github.com/toolcrib/toolcrib/platform/egress"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/platform/secretref"
	"github.com/toolcrib/toolcrib/services/registry/internal/store"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Limits on free text and lists.
const (
	maxName        = 200
	maxText        = 2000
	maxList        = 1000
	maxPath        = 4096
	maxArgs        = 256
	minScanEvery   = time.Second
	maxScanEvery   = 7 * 24 * time.Hour
	defaultPage    = 100
	maxPage        = 1000
	pageTokenV1    = "v1:"
	ownerGroupPref = "group:"
)

func checkText(v *apierror.Violations, field, s string, limit int) {
	if len(s) > limit {
		v.Add(field, "longer than %d bytes", limit)
	} else if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		v.Add(field, "contains a control character")
	}
}

// checkLine checks text shown on one line (a name, a command, an
// argument): no control character at all (newline, tab, ESC, …) and no
// Unicode bidirectional override, which would reorder what a terminal
// shows.
func checkLine(v *apierror.Violations, field, s string, limit int) {
	if len(s) > limit {
		v.Add(field, "longer than %d bytes", limit)
	} else if strings.ContainsFunc(s, lineUnsafe) {
		v.Add(field, "contains a control character (newline, tab, escape, …) or a bidirectional override")
	}
}

func lineUnsafe(r rune) bool {
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f
}

// checkIdent checks a subject, group or owner name ([ids.ValidName]).
func checkIdent(v *apierror.Violations, field, s string) {
	if p := ids.NameProblem(s); p != "" {
		v.Add(field, "%s", p)
	}
}

// checkOwner checks an owner, [principal.Owner] in its written form:
// `<tenant>/group:<group>` or `<tenant>/user:<subject>`.
func checkOwner(v *apierror.Violations, field, owner string) {
	if owner == "" {
		v.Add(field, "required: %s", principal.OwnerSyntax)
		return
	}
	if _, err := principal.ParseOwner(owner); err != nil {
		v.Add(field, "%v", err)
	}
}

// checkID checks a required id against its pattern.
func checkID(v *apierror.Violations, field, id string, valid func(string) bool, pattern string) {
	switch {
	case id == "":
		v.Add(field, "required")
	case !valid(id):
		v.Add(field, "must match %s", pattern)
	}
}

func checkServerID(v *apierror.Violations, field, id string) {
	checkID(v, field, id, ids.ValidServerID, ids.ServerIDPattern)
}

func checkTenantID(v *apierror.Violations, field, id string) {
	checkID(v, field, id, ids.ValidTenantID, ids.TenantIDPattern)
}

// checkClassName checks `<tenant_id>.<class>`.
func checkClassName(v *apierror.Violations, field, name string) {
	switch {
	case name == "":
		v.Add(field, "required")
	case !ids.ValidClass(name):
		v.Add(field, "must be <tenant_id>.<class>: lowercase letters, digits, - and _ (e.g. tenant-a.readers)")
	}
}

// validateServer checks every field of a server record under prefix; its
// URL must be one the egress policy allows.
func validateServer(v *apierror.Violations, prefix string, s *registryv1.Server, eg egress.Policy) {
	f := func(name string) string { return prefix + "." + name }
	if s == nil {
		v.Add(prefix, "required")
		return
	}
	checkServerID(v, f("server_id"), s.GetServerId())
	checkLine(v, f("display_name"), s.GetDisplayName(), maxName)
	checkText(v, f("description"), s.GetDescription(), maxText)
	checkOwner(v, f("owner"), s.GetOwner())
	switch t := s.GetTransport().(type) {
	case *registryv1.Server_StreamableHttp:
		checkEndpoint(v, f("streamable_http.url"), t.StreamableHttp.GetUrl(), eg)
	case *registryv1.Server_Stdio:
		if t.Stdio.GetCommand() == "" {
			v.Add(f("stdio.command"), "required")
		} else {
			checkLine(v, f("stdio.command"), t.Stdio.GetCommand(), maxPath)
		}
		if len(t.Stdio.GetArgs()) > maxArgs {
			v.Add(f("stdio.args"), "more than %d arguments", maxArgs)
		}
		for i, a := range t.Stdio.GetArgs() {
			if i == maxArgs {
				break
			}
			checkLine(v, fmt.Sprintf("%s[%d]", f("stdio.args"), i), a, maxPath)
		}
		if d := t.Stdio.GetPinDir(); d != "" {
			checkLine(v, f("stdio.pin_dir"), d, maxPath)
			if !path.IsAbs(d) || path.Clean(d) != d || d == "/" {
				v.Add(f("stdio.pin_dir"), "must be an absolute, clean path of a directory other than / (e.g. /opt/mcp/inventory)")
			}
		}
	default:
		v.Add(f("transport"), "exactly one of streamable_http and stdio is required")
	}
	if tl := s.GetTrustLevel(); tl == registryv1.TrustLevel_TRUST_LEVEL_UNSPECIFIED {
		v.Add(f("trust_level"), "required: one of FIRST_PARTY, PARTNER, THIRD_PARTY")
	} else if _, ok := registryv1.TrustLevel_name[int32(tl)]; !ok {
		v.Add(f("trust_level"), "unknown trust level %d", tl)
	}
	if rs := s.GetRevisionSource(); rs == registryv1.RevisionSource_REVISION_SOURCE_UNSPECIFIED {
		v.Add(f("revision_source"), "required: SERVER_PROVIDED or NONE")
	} else if _, ok := registryv1.RevisionSource_name[int32(rs)]; !ok {
		v.Add(f("revision_source"), "unknown revision source %d", rs)
	}
	if pin := s.GetIdentityPin(); pin != "" && !canonical.ValidDigest(pin) {
		v.Add(f("identity_pin"), "must be sha256:<64 lowercase hex digits>, or empty to pin on first scan")
	}
	if si := s.GetScanInterval(); si != nil {
		if err := si.CheckValid(); err != nil {
			v.Add(f("scan_interval"), "not a valid duration")
		} else if d := si.AsDuration(); d != 0 && (d < minScanEvery || d > maxScanEvery) {
			v.Add(f("scan_interval"), "must be 0 (the discovery default) or between %v and %v", minScanEvery, maxScanEvery)
		}
	}
}

// checkEndpoint accepts https URLs, and http only to a loopback host, that
// the egress policy allows (the violation names the policy's rule). A URL
// carrying credentials is refused without echoing it.
func checkEndpoint(v *apierror.Violations, field, raw string, eg egress.Policy) {
	if raw == "" {
		v.Add(field, "required")
		return
	}
	before := len(*v)
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxPath:
		v.Add(field, "longer than %d bytes", maxPath)
	case strings.ContainsFunc(raw, lineUnsafe):
		v.Add(field, "contains a control character")
	case err != nil || u.Host == "" || u.Opaque != "":
		v.Add(field, "must be an absolute https:// URL (http:// only to a loopback host)")
	case u.User != nil:
		v.Add(field, "must not carry credentials; give the credential to an audience class as a secret reference (the URL is not shown)")
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	case u.Scheme == "http":
		v.Add(field, "http:// is allowed only to a loopback host (127.0.0.1, ::1, localhost); use https://")
	default:
		v.Add(field, "scheme must be https (or http to a loopback host)")
	}
	if len(*v) > before {
		return
	}
	if re := egress.Refused(eg.CheckURL(raw)); re != nil {
		v.Add(field, "%s", re.Description())
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSecretRef checks a reference against the secret policy; the
// description names the rule, never the value (a user may have pasted a
// token by mistake).
func checkSecretRef(v *apierror.Violations, field, ref string, sp secretref.Policy) {
	if re := secretref.Refused(sp.Check(ref)); re != nil {
		v.Add(field, "%s", re.Description())
	}
}

func validateAudienceClass(v *apierror.Violations, a *registryv1.AudienceClass, sp secretref.Policy) {
	const prefix = "audience_class"
	if a == nil {
		v.Add(prefix, "required")
		return
	}
	checkClassName(v, prefix+".name", a.GetName())
	checkTenantID(v, prefix+".tenant_id", a.GetTenantId())
	if tenant, _, _ := strings.Cut(a.GetName(), "."); a.GetTenantId() != "" && tenant != a.GetTenantId() {
		v.Add(prefix+".tenant_id", "must be the name's prefix %s", apierror.Echo(tenant))
	}
	checkText(v, prefix+".description", a.GetDescription(), maxText)
	if len(a.GetServers()) > maxList {
		v.Add(prefix+".servers", "more than %d servers", maxList)
	}
	seen := map[string]bool{}
	for i, s := range a.GetServers() {
		at := fmt.Sprintf("%s.servers[%d]", prefix, i)
		checkServerID(v, at+".server_id", s.GetServerId())
		if seen[s.GetServerId()] {
			v.Add(at+".server_id", "server %s is listed twice", apierror.Echo(s.GetServerId()))
		}
		seen[s.GetServerId()] = true
		checkSecretRef(v, at+".secret_ref", s.GetSecretRef(), sp)
	}
}

// grantChange validates a grant or revoke request.
func grantChange(tenant, subject, group string, scopes, classes []string, conditionOnly bool) (store.GrantChange, error) {
	var v apierror.Violations
	checkTenantID(&v, "tenant_id", tenant)
	switch {
	case subject == "" && group == "":
		v.Add("subject", "exactly one of subject and group is required")
	case subject != "" && group != "":
		v.Add("group", "give subject or group, not both")
	case subject != "":
		checkIdent(&v, "subject", subject)
	default:
		checkIdent(&v, "group", group)
		if strings.HasPrefix(group, ownerGroupPref) {
			v.Add("group", "give the group name without the %q prefix", ownerGroupPref)
		}
	}
	if len(scopes) == 0 && len(classes) == 0 && !conditionOnly {
		v.Add("scopes", "give at least one scope or audience class")
	}
	if len(scopes) > maxList || len(classes) > maxList {
		v.Add("scopes", "more than %d entries", maxList)
	}
	for i, s := range scopes {
		if !ids.ValidScope(s) {
			v.Add(fmt.Sprintf("scopes[%d]", i), "must match %s", ids.ScopePattern)
		}
	}
	for i, c := range classes {
		at := fmt.Sprintf("audience_classes[%d]", i)
		checkClassName(&v, at, c)
		if t, _, _ := strings.Cut(c, "."); tenant != "" && t != tenant && c != "" {
			v.Add(at, "audience class %s belongs to tenant %s, not %s", apierror.Echo(c), apierror.Echo(t), apierror.Echo(tenant))
		}
	}
	if err := v.Err(); err != nil {
		return store.GrantChange{}, err
	}
	return store.GrantChange{TenantID: tenant, Subject: subject, Group: group, Scopes: scopes, AudienceClasses: classes}, nil
}

// grantChangeWithCondition validates a GrantScopes request: the grant
// change, and the condition compiled (platform/condition) so a condition
// that does not parse, type-check or fit the cost budget is refused with
// its position before anything is written. A request may carry only a
// condition (or clear_condition), for a grant that exists.
func grantChangeWithCondition(req *registryv1.GrantScopesRequest) (store.GrantChange, error) {
	setCond := req.GetCondition() != "" || req.GetClearCondition()
	scopes, classes := req.GetScopes(), req.GetAudienceClasses()
	var v apierror.Violations
	if req.GetCondition() != "" && req.GetClearCondition() {
		v.Add("clear_condition", "give condition or clear_condition, not both")
	}
	if req.GetCondition() != "" {
		if _, cerr := condition.Compile(req.GetCondition()); cerr != nil {
			v.Add("condition", "%s", cerr.Error())
		}
	}
	if err := v.Err(); err != nil {
		return store.GrantChange{}, err
	}
	g, err := grantChange(req.GetTenantId(), req.GetSubject(), req.GetGroup(), scopes, classes, setCond)
	if err != nil {
		return store.GrantChange{}, err
	}
	g.SetCondition, g.Condition = setCond, req.GetCondition()
	return g, nil
}

// page validates a page size and token.
func page(v *apierror.Violations, size int32, token string) store.Page {
	p := store.Page{Limit: int(size)}
	switch {
	case size < 0:
		v.Add("page_size", "must not be negative")
	case size == 0:
		p.Limit = defaultPage
	case size > maxPage:
		p.Limit = maxPage
	}
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		after, ok := strings.CutPrefix(string(b), pageTokenV1)
		if err != nil || !ok || after == "" {
			v.Add("page_token", "not a token this service returned")
		}
		p.After = after
	}
	return p
}

// nextToken returns the token for the page after last; empty when there is
// none.
func nextToken(hasMore bool, last string) string {
	if !hasMore {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenV1 + last))
}
