package condition

// The examples (docs/concepts/conditions.md), kept here so the
// docs, the CLI's tests and the e2e tests use the same text.
const (
	// PathExample: only paths under /data/<the caller's tenant>/, with no
	// `..` segment (in the middle or at the end: `/data/<tenant>/..` is
	// /data).
	PathExample = `args.path.startsWith("/data/" + principal.tenant + "/") && !args.path.contains("/../") && !args.path.endsWith("/..")`
	// AmountExample: amounts up to 500 unless the caller is a finance lead.
	AmountExample = `double(args.amount) <= 500.0 || "finance-leads" in principal.groups`
	// RunExample: only inside a run id the host declared.
	RunExample = `request.run_id != ""`
	// WindowExample: no side-effect call outside 07:00–19:00 UTC.
	WindowExample = `tool.effect == "READ_ONLY" || (request.time.getHours() >= 7 && request.time.getHours() < 19)`
)
