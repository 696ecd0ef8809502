// Package admission is the admission service (DESIGN §7):
// AdmissionService.Check, the decision made before every tool call, and
// ListVisibleTools. [Run] starts it the same way from `main`, the dev
// launcher and tests. Its parts: internal/decision (the pure rules),
// internal/args (argument validation), internal/cache (L1 + Redis decision
// cache), internal/receipts (batched receipts), internal/search (visible
// sets and tool search), internal/replica (heads and immutable material),
// internal/upstream (the registry and discovery clients and Watch loops),
// internal/grpcapi (the API, one error translation).
package admission
