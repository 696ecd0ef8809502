// Package guard is the rollout guard (issue 15 point 4): a pass, run as a
// periodic unique job of discovery's queue (one process at a time), that
// rolls an active pointer back, or closes it, when its generation's
// missing-tool rate (from admission's receipts) goes above a threshold or
// an unauthorized event is reported against it, then holds the pair until
// an operator resumes it.
package guard
