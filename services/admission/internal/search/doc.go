// Package search builds ListVisibleTools answers (DESIGN §7): from the
// tools a principal may call now it makes the model view (name,
// description, input schema) apart from the runtime view (tool id, server,
// class, generation, descriptor digest, effect class, source state), names
// tools `server__tool` only where two visible tools share an MCP name,
// applies the filters (effect classes, a text query, a size budget, a
// maximum count) in a deterministic order, and digests the whole visible
// set so a host can tell when it changed.
//
// Tool search ranks with BM25F (k1 = 1.2, b = 0.75) over name, title and
// description, weighted 3:2:1: each field's term frequency is normalised
// by that field's length against its average, the weighted sum saturated
// once (so a long description no longer dilutes a match in the name). Words are lowercased, split at non-letters and at
// case changes, and lightly stemmed (plural and -ing/-ed endings). Its
// quality is measured by TestRecallAt5 on a committed query set of 5,000
// tools.
//
// A [Set] is immutable once built: the caller builds it once per visible
// set (keyed by the heads it was built from) and answers every request
// against it.
package search
