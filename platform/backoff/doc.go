// Package backoff is the one retry delay of toolcrib's loops: a stream
// follower reconnecting, a LISTEN connection reopened, a batch of receipts
// retried, a listening session to an MCP server reopened. Each wait is
// exponential with jitter: between half and all of the current step, the
// step doubling after every wait up to a cap, back to the first step after
// a success. Jitter keeps replicas that lost the same dependency at the
// same moment from coming back in lockstep.
package backoff
