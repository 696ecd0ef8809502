// Package egress is the operator's policy of where toolcrib may open
// network connections to MCP servers. It is defined once and checked twice:
// by the registry when a server's URL is registered or updated
// ([Policy.CheckURL]), and by discovery at dial time on every resolved
// address ([Policy.DialContext]), so a name that resolves somewhere else
// later (DNS rebinding) still cannot reach a forbidden address.
//
// The rules, in the order they are applied to an address:
//
//   - cloud metadata addresses (169.254.169.254, 169.254.170.2,
//     fd00:ec2::254, 100.100.100.200) and names (metadata.google.internal,
//     …) are always refused ([RuleMetadata]);
//   - link-local addresses (169.254.0.0/16, fe80::/10) are always refused
//     ([RuleLinkLocal]);
//   - unspecified, multicast and broadcast addresses are always refused
//     ([RuleSpecial]);
//   - loopback (127.0.0.0/8, ::1, localhost) only when the operator allows
//     it ([RuleLoopback]), and then only on the ports the operator names
//     ([RuleLoopbackPort]: `toolcrib dev up` allows 7301 and 7310-7399, so
//     Postgres, Redis and toolcrib's own ports stay refused), unless every
//     port is allowed ([Policy.AllowLoopback], for tests);
//   - other non-public addresses (10/8, 172.16/12, 192.168/16, 100.64/10,
//     fc00::/7, …) only inside an allowed CIDR ([RulePrivate]);
//   - public addresses are allowed;
//   - when allowed host patterns are configured, a URL's host must match
//     one of them, or be an address inside an allowed CIDR ([RuleHost]).
package egress
