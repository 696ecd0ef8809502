// Package ids is the one grammar of toolcrib's identifiers. Every service,
// the CLI and the token checks import it; none writes a pattern of its own.
//
// The grammar (each pattern matches the whole string; lengths in bytes):
//
//	server id       [a-z0-9][a-z0-9_-]{0,62}              (no dot: it prefixes a tool id)
//	tenant id       [a-z0-9][a-z0-9-]{0,62}               (no '_', no dot)
//	audience class  <tenant id>.<class part>              (at most 127)
//	  class part    [a-z0-9][a-z0-9_-]{0,62}              (no dot)
//	tool name       [A-Za-z0-9_.-]{1,128}                 (the MCP tool name rule)
//	tool id         <server id>.<tool name>               (split at the first dot; at most 192)
//	run id          [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}
//	scope           [A-Za-z0-9][A-Za-z0-9:._/*-]{0,127}   (e.g. shipment:read)
//	subject, group  1-256 bytes, no white space or control character
//	                (a grant's subject or group, an owner's name part)
//
// An owner (`<tenant id>/group:<group>` or `<tenant id>/user:<subject>`) is
// parsed by principal.ParseOwner from these parts.
//
// The audience-class grammar is the registry's, the one that wrote the
// stored classes: discovery once also accepted '_' in the tenant part and
// '.' in the class part, names no class can have.
//
// The matchers are written by hand over bytes (a regexp match per field was
// a measurable share of admission's cached Check); the *Pattern constants
// are the same grammar as regular expressions, for messages, and the tests
// hold each matcher to its pattern.
package ids
