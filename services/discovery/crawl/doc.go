// Package crawl reads one MCP server's `tools/list`, page by page, over a
// go-sdk [mcp.ClientSession], and proves (or refuses) that the pages form
// one whole catalog (DESIGN §6, invariant I2).
//
// It is importable from outside the discovery module on purpose: the fault
// suite drives it with any go-sdk transport and compares its outcome with an
// independent oracle.
//
// # Sessions and transports
//
// [Open] connects to a [Target]: streamable HTTP (`https://`, or `http://` on
// loopback only unless [Options.AllowInsecureHTTP]), stdio (a command and
// its arguments, started with a minimal environment), or any other go-sdk
// [mcp.Transport] (in-memory, custom). The client asks for the newest
// protocol version the go-sdk speaks (2026-07-28, stateless, via
// `server/discover`) and falls back to `initialize` (2025-11-25 or whatever
// older version the server picks); the negotiated version is recorded, and
// versions older than [Options.MinProtocolVersion] are refused with
// PROTOCOL_UNSUPPORTED.
//
// Identity (compared with the registry's pin before any credential is sent
// where the transport allows it):
//   - https: [SPKIDigest] of the TLS leaf certificate, after the chain was
//     verified against the system roots plus [Options.RootCAs]; checked in
//     the handshake of every connection of the session;
//   - stdio: [stdio.Hasher.Identity] of the command line and the content it
//     runs (the executable on PATH, every argument that is a regular file,
//     the pinned directory's tree), checked before the process starts; a
//     changed script behind the same command line is a mismatch;
//   - plain http: [URLDigest] of the URL.
//
// A mismatch ends the scan QUARANTINED with IDENTITY_MISMATCH.
//
// The upstream credential is sent as `Authorization: Bearer` (HTTP) or in
// the environment variable [Options.CredentialEnv] (stdio). It is never
// logged, stored or put in a detail; details are scrubbed of it.
//
// # Raw capture
//
// The go-sdk's typed [mcp.Tool] drops fields it does not know and its
// ListToolsResult cannot tell an empty `nextCursor` from an absent one, so
// the session taps the wire below the SDK's decoding (a wrapped
// [mcp.Connection] for stdio, in-memory and other transports; a wrapped
// HTTP round tripper for streamable HTTP, whose connection the SDK must keep
// unwrapped) and keeps the raw `result` bytes of every tools/list it sends.
// Every tool is kept exactly as sent ([Tool.Raw]); its descriptor digest is
// [canonical.DigestBytes] of its RFC 8785 form, computed once.
//
// The go-sdk caches list results for their `ttlMs` under protocol
// 2026-07-28. The crawl must never be answered from that cache (the closing
// re-check would prove nothing), so after every call it sets the returned
// result's TTL to zero; the cache holds that same result and drops it on the
// next lookup. A test proves the re-check reaches the server.
//
// # The page loop
//
// The loop is the crawl's own, not the SDK iterator. For every page it
// records the cursor sent and received, whether the page has a next page
// (a `nextCursor`; before 2026-07-28 an empty-string one is the end of the
// list, since then it is a cursor), the source revision
// `_meta["dev.toolcrib/catalog-revision"]`, the tool count, the page digest
// and the size. After the last page it reads the first page once more (the
// closing re-check).
//
// The outcome is decided by the first rule that applies, checked in this
// order after every response (so the end state and reason are a function of
// the message order on the wire):
//
//  1. the TLS identity did not match: QUARANTINED IDENTITY_MISMATCH;
//  2. a `notifications/tools/list_changed` was read since the first request:
//     INCOMPLETE LIST_CHANGED;
//  3. one message exceeded the byte cap: INCOMPLETE BYTE_CAP; one message
//     nested JSON deeper than [MaxMessageDepth] (the go-sdk refuses to
//     decode it): QUARANTINED MESSAGE_TOO_DEEP, refused content like a
//     schema over the validator's limits, not a transport fault (measured
//     on the wire for streamable HTTP and stdio);
//  4. the call failed: for a versioned source ([Options.Versioned]) a
//     JSON-RPC -32602 answer to a request that carried a cursor is
//     INCOMPLETE REVISION_MISMATCH (a revision-bound cursor outlived its
//     revision, DESIGN §6); any other failure is INCOMPLETE
//     TRANSPORT_ERROR;
//  5. the result is not a tools/list result object: INCOMPLETE
//     TRANSPORT_ERROR;
//  6. versioned source: a page without a revision is INCOMPLETE
//     REVISION_MISSING, a revision other than the first page's is
//     INCOMPLETE REVISION_MISMATCH;
//  7. a `nextCursor` equal to the cursor just sent: INCOMPLETE
//     REPEATED_CURSOR; one sent earlier in the scan: INCOMPLETE
//     CURSOR_CYCLE. From 2026-07-28 on the first request's absent cursor
//     counts as "" (a server cannot tell them apart: the revision package
//     and go-sdk start over at ""), so an empty `nextCursor` never leads
//     anywhere new;
//  8. tools over [Options.MaxTools]: TOOL_CAP; bytes of the pages read so
//     far over [Options.MaxBytes]: BYTE_CAP; a next page beyond
//     [Options.MaxPages]: INCOMPLETE PAGE_CAP. The caps bound the walk; the
//     re-check is not counted.
//
// The closing re-check applies rules 1–6 and additionally requires its
// tools to be the walk's first tools (by descriptor digest), and all of
// them when it has no next page (REVISION_MISMATCH otherwise: the catalog
// moved, or the server served different content under one revision); the
// pages may be cut differently the second time. A final check of rules 1
// and 2 follows it.
//
// A crawl that passes is SNAPSHOT_PROVEN for a versioned source and
// UNVERSIONED_OBSERVATION otherwise. Validation of the tools is the job of
// package validate; the crawl only keeps what it needs to prove wholeness.
package crawl
