// Package watchtest is the contract test suite of every toolcrib Watch RPC
// (RegistryService.Watch, DiscoveryService.Watch) and of every fake that
// stands in for one: resume, compaction, `from_revision` 0, ahead, drain,
// heartbeat cadence, tenant filtering and gapless order, as documented in
// registry.proto and discovery.proto. Run it with [Run] against a
// [Target]; a fake that does not pass it may not be used in place of the
// service.
package watchtest
