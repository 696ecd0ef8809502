package decision

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Rollout is the rollout stage of one (server, audience class) pair as the
// policy at one epoch has it (registry.proto RolloutStage). A nil *Rollout
// is FULL: the registry's stage of a pair never set.
type Rollout struct {
	Stage registryv1.Stage
	// Percent is the canary's share of runs, 0..100 (CANARY only).
	Percent int32
	// Effects are the effect classes a canary admits (CANARY only).
	Effects []catalogv1.EffectClass
}

// Shadow reports whether the pair's generations are answered as if they
// did not exist: stage SHADOW, and — failing closed — a stage this replica
// does not know (UNSPECIFIED or a value newer than it).
func (ro *Rollout) Shadow() bool {
	if ro == nil {
		return false
	}
	switch ro.Stage {
	case registryv1.Stage_STAGE_CANARY, registryv1.Stage_STAGE_FULL:
		return false
	}
	return true
}

// Canary reports whether the stage is CANARY.
func (ro *Rollout) Canary() bool { return ro != nil && ro.Stage == registryv1.Stage_STAGE_CANARY }

// CanaryBuckets is the number of buckets runs are hashed into: a canary of
// p percent admits the buckets below p × 100.
const CanaryBuckets = 10_000

// CanaryBucket is the stable bucket of a run for one (server, class)
// canary: the first 8 bytes of sha256("<server>|<class>|<run>") read as a
// big-endian unsigned integer, modulo [CanaryBuckets]. Server ids and class
// names contain no '|', so the input is unambiguous; the class in it makes
// a run's draw independent across the classes one server is rolled out to.
func CanaryBucket(server, class, run string) int {
	sum := sha256.Sum256([]byte(server + "|" + class + "|" + run))
	return int(binary.BigEndian.Uint64(sum[:8]) % CanaryBuckets)
}

// CanaryRun is where a request's run falls in a pair's rollout.
type CanaryRun uint8

// Where a run falls.
const (
	// NotCanary: the stage is not CANARY; the run does not matter.
	NotCanary CanaryRun = iota
	// RunMissing: CANARY, and the request carries no run id.
	RunMissing
	// RunOutside: CANARY, the run's bucket is outside the share.
	RunOutside
	// RunInside: CANARY, the run's bucket is inside the share.
	RunInside
)

// RunOf returns where run falls in the pair's rollout. It is what the
// decision cache keys on besides the epoch (which fixes the stage).
func (ro *Rollout) RunOf(server, class, run string) CanaryRun {
	switch {
	case !ro.Canary():
		return NotCanary
	case run == "":
		return RunMissing
	case CanaryBucket(server, class, run) < int(ro.Percent)*CanaryBuckets/100:
		return RunInside
	}
	return RunOutside
}

// Admits reports whether the stage admits a tool of effect for run: every
// stage but SHADOW and CANARY does; CANARY only a run inside its share and
// an effect class among its own.
func (ro *Rollout) Admits(server, class, run string, effect catalogv1.EffectClass) bool {
	_, ok := ro.canary(server, class, run, effect)
	return ok && !ro.Shadow()
}

// canary applies the CANARY rule; ok is true when it does not deny.
func (ro *Rollout) canary(server, class, run string, effect catalogv1.EffectClass) (o Outcome, ok bool) {
	switch ro.RunOf(server, class, run) {
	case NotCanary:
		return Outcome{}, true
	case RunMissing:
		return deny(Forbidden, "canary: server %s is in canary for %s and admits only runs in its share; the request has no run_id", server, class), false
	case RunOutside:
		return deny(Forbidden, "canary: the run is outside the %d%% canary of server %s for %s", ro.Percent, server, class), false
	}
	if !slices.Contains(ro.Effects, effect) {
		return deny(Forbidden, "canary: server %s is in canary for %s with effect classes %s only; the tool is %s",
			server, class, effectNames(ro.Effects), effectName(effect)), false
	}
	return Outcome{}, true
}

func effectNames(es []catalogv1.EffectClass) string {
	if len(es) == 0 {
		return "(none)"
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = effectName(e)
	}
	return strings.Join(names, ", ")
}
