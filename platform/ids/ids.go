package ids

import (
	"strings"
	"unicode"
)

// The grammar as regular expressions (without anchors), for messages and
// help texts. Each is exactly what its matcher accepts.
const (
	ServerIDPattern  = `[a-z0-9][a-z0-9_-]{0,62}`
	TenantIDPattern  = `[a-z0-9][a-z0-9-]{0,62}`
	ClassPartPattern = `[a-z0-9][a-z0-9_-]{0,62}`
	ClassPattern     = TenantIDPattern + `\.` + ClassPartPattern
	ToolNamePattern  = `[A-Za-z0-9_.-]{1,128}`
	ToolIDPattern    = ServerIDPattern + `\.` + ToolNamePattern
	RunIDPattern     = `[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}`
	ScopePattern     = `[A-Za-z0-9][A-Za-z0-9:._/*-]{0,127}`
)

// The grammar in words, for messages that a person reads.
const (
	ClassSyntax  = "<tenant_id>.<class>: lowercase letters, digits and - in the tenant, lowercase letters, digits, - and _ in the class"
	ToolIDSyntax = "<server_id>.<tool name>: server id " + ServerIDPattern + ", tool name " + ToolNamePattern
	RunIDSyntax  = "1-128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
	NameSyntax   = "1-256 bytes, no white space or control character"
)

// Longest well-formed ids, in bytes.
const (
	MaxServerIDBytes = 63
	MaxTenantIDBytes = 63
	MaxClassBytes    = MaxTenantIDBytes + 1 + maxClassPartBytes
	MaxToolNameBytes = 128
	MaxToolIDBytes   = MaxServerIDBytes + 1 + MaxToolNameBytes
	MaxRunIDBytes    = 128
	MaxScopeBytes    = 128
	MaxNameBytes     = 256
)

const (
	separator         = "."
	maxClassPartBytes = 63
)

func lowerOrDigit(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func alnum(c byte) bool { return lowerOrDigit(c) || 'A' <= c && c <= 'Z' }

func serverByte(c byte) bool { return lowerOrDigit(c) || c == '_' || c == '-' }

func tenantByte(c byte) bool { return lowerOrDigit(c) || c == '-' }

func toolNameByte(c byte) bool { return alnum(c) || c == '_' || c == '.' || c == '-' }

func runByte(c byte) bool { return alnum(c) || c == '_' || c == '.' || c == ':' || c == '-' }

func scopeByte(c byte) bool { return runByte(c) || c == '/' || c == '*' }

// part reports whether s is one byte accepted by first, then at most
// maxLen-1 bytes accepted by rest.
func part(s string, maxLen int, first, rest func(byte) bool) bool {
	if len(s) < 1 || len(s) > maxLen || !first(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !rest(s[i]) {
			return false
		}
	}
	return true
}

// ValidServerID reports whether s is a server id ([ServerIDPattern]).
func ValidServerID(s string) bool { return part(s, MaxServerIDBytes, lowerOrDigit, serverByte) }

// ValidTenantID reports whether s is a tenant id ([TenantIDPattern]), the
// `tenant` claim of a token and the tenant part of an owner and of an
// audience class.
func ValidTenantID(s string) bool { return part(s, MaxTenantIDBytes, lowerOrDigit, tenantByte) }

// ValidClass reports whether s is an audience class name,
// `<tenant_id>.<class>` ([ClassPattern]).
func ValidClass(s string) bool {
	tenant, class, ok := strings.Cut(s, separator)
	return ok && ValidTenantID(tenant) && part(class, maxClassPartBytes, lowerOrDigit, serverByte)
}

// TenantOfClass returns the tenant part of an audience class name (the
// text before the first dot; all of s when it has none).
func TenantOfClass(s string) string {
	t, _, _ := strings.Cut(s, separator)
	return t
}

// ValidToolName reports whether s is an MCP tool name ([ToolNamePattern]).
func ValidToolName(s string) bool { return part(s, MaxToolNameBytes, toolNameByte, toolNameByte) }

// SplitToolID splits `<server_id>.<tool name>` at the first dot; ok is
// false when either part is malformed ([ToolIDPattern]).
func SplitToolID(s string) (serverID, name string, ok bool) {
	serverID, name, found := strings.Cut(s, separator)
	if !found || !ValidServerID(serverID) || !ValidToolName(name) {
		return "", "", false
	}
	return serverID, name, true
}

// ValidToolID reports whether s is a tool id ([ToolIDPattern]).
func ValidToolID(s string) bool {
	_, _, ok := SplitToolID(s)
	return ok
}

// ToolID joins a server id and a tool name.
func ToolID(serverID, name string) string { return serverID + separator + name }

// ValidRunID reports whether s is a run id ([RunIDPattern]).
func ValidRunID(s string) bool { return part(s, MaxRunIDBytes, alnum, runByte) }

// ValidScope reports whether s is a scope name ([ScopePattern]).
func ValidScope(s string) bool { return part(s, MaxScopeBytes, alnum, scopeByte) }

// ValidName reports whether s is a subject or group name ([NameSyntax]).
func ValidName(s string) bool { return NameProblem(s) == "" }

// NameProblem says why s is not a subject or group name, or returns ""
// when it is one. The text never contains s.
func NameProblem(s string) string {
	switch {
	case s == "":
		return "required"
	case len(s) > MaxNameBytes:
		return "longer than 256 bytes"
	case strings.ContainsFunc(s, nameUnsafe):
		return "contains white space or a control character"
	}
	return ""
}

func nameUnsafe(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }
