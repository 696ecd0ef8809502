package principal

import (
	"strings"

	"github.com/toolcrib/toolcrib/platform/ids"
)

// Owner syntax: `<tenant>/group:<group>` or `<tenant>/user:<subject>`.
const (
	ownerGroupKind = "group:"
	ownerUserKind  = "user:"
	// MaxOwnerName bounds the group or subject part of an owner, in bytes.
	MaxOwnerName = ids.MaxNameBytes
	// OwnerSyntax is the owner form, for error messages and help texts.
	OwnerSyntax = "<tenant>/group:<group> or <tenant>/user:<subject>"
)

// Owner names who owns something (a server and its tools): one group or
// one subject of one tenant. A bare group name means nothing on its own: a
// group `inventory-team` of tenant-b is not the `inventory-team` of tenant-a,
// so an owner always names its tenant, and [Principal.Owns] matches the
// token's tenant claim as well as the group or subject.
type Owner struct {
	// Tenant is the tenant the group or subject belongs to.
	Tenant string
	// Group is set for a group owner.
	Group string
	// Subject is set for a subject owner (the token's `sub`).
	Subject string
}

// String returns the owner in its one written form.
func (o Owner) String() string {
	if o.Group != "" {
		return o.Tenant + "/" + ownerGroupKind + o.Group
	}
	return o.Tenant + "/" + ownerUserKind + o.Subject
}

// GroupOwner returns the owner `<tenant>/group:<group>`.
func GroupOwner(tenant, group string) Owner { return Owner{Tenant: tenant, Group: group} }

// UserOwner returns the owner `<tenant>/user:<subject>`.
func UserOwner(tenant, subject string) Owner { return Owner{Tenant: tenant, Subject: subject} }

// OwnerError says why an owner string is malformed. Its message never
// contains the string itself.
type OwnerError struct {
	Reason string
}

func (e *OwnerError) Error() string { return "owner " + e.Reason }

// ParseOwner parses `<tenant>/group:<group>` or `<tenant>/user:<subject>`.
// The name is non-empty, at most [MaxOwnerName] bytes, and has no white
// space or control characters. An [OwnerError] explains a refusal.
func ParseOwner(s string) (Owner, error) {
	tenant, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Owner{}, &OwnerError{Reason: "must be " + OwnerSyntax + " (a group or subject is bound to its tenant)"}
	}
	if !ids.ValidTenantID(tenant) {
		return Owner{}, &OwnerError{Reason: "tenant must match " + ids.TenantIDPattern}
	}
	var o Owner
	var name string
	switch {
	case strings.HasPrefix(rest, ownerGroupKind):
		name = rest[len(ownerGroupKind):]
		o = GroupOwner(tenant, name)
	case strings.HasPrefix(rest, ownerUserKind):
		name = rest[len(ownerUserKind):]
		o = UserOwner(tenant, name)
	default:
		return Owner{}, &OwnerError{Reason: "must be " + OwnerSyntax + ": after the tenant comes group: or user:"}
	}
	if p := ids.NameProblem(name); p != "" {
		return Owner{}, &OwnerError{Reason: "group or subject name: " + p}
	}
	return o, nil
}
