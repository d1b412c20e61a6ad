// Package crashpoint kills the process at a named point in weir's code,
// for the chaos harness and the crash tests. Nothing is armed unless the
// program arms it: the weir command calls Arm with WEIR_CRASHPOINT (a
// point's name and, after a colon, how many times the point is passed
// first: "ledger.after-effect:3" dies the fourth time), which `weir chaos`
// sets in the worker it runs, and a crash test's child process calls Arm
// itself. Once armed, Hit sends the process SIGKILL at that point.
// Disarmed, Hit is one atomic load. The package reads no environment.
package crashpoint

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Env is the variable that names the point.
const Env = "WEIR_CRASHPOINT"

// The named points.
const (
	// OutboxBeforePublish is after the data and its message committed and
	// a relay claimed the message, before the relay publishes it.
	OutboxBeforePublish = "outbox.before-publish"
	// OutboxAfterPublish is after the broker confirmed a relay's messages
	// and before they are marked published.
	OutboxAfterPublish = "outbox.after-publish"
	// LedgerAfterEffect is after an effect ran and before its result is
	// written to the ledger.
	LedgerAfterEffect = "ledger.after-effect"
	// ConsumerBeforeAck is after a consumer's transaction (its ledger
	// writes, its inbox record) committed and before the message is
	// acked.
	ConsumerBeforeAck = "consumer.before-ack"
	// WorkflowMidTransition is inside a workflow's transition, after its
	// state handler ran and before the new state commits.
	WorkflowMidTransition = "workflow.mid-transition"
	// ConsumerAfterEarlyAck is in the chaos worker's deliberately wrong
	// consumer (chaos.WorkerConfig.AckBeforeCommit), after the server
	// confirmed its ack of a message and before the message's transaction
	// runs: the gap that consumer leaves, where the harness must find the
	// message lost.
	ConsumerAfterEarlyAck = "consumer.after-early-ack"
	// PipelineAfterSave is after a document's extraction and its index
	// job committed to SQL, before its file moves to processed/.
	PipelineAfterSave = "pipeline.after-save"
)

// armed is the point and the passes left before it kills, or nil.
var armed atomic.Pointer[point]

type point struct {
	name string
	left atomic.Int64
}

// Arm sets the point to kill at, as WEIR_CRASHPOINT spells it; "" disarms.
func Arm(spec string) error {
	if spec == "" {
		armed.Store(nil)
		return nil
	}
	name, count, found := strings.Cut(spec, ":")
	p := &point{name: name}
	if found {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: the count after the colon must be a whole number, 0 or more", Env, spec)
		}
		p.left.Store(n)
	}
	if name == "" {
		return fmt.Errorf("%s=%q: no point named", Env, spec)
	}
	armed.Store(p)
	return nil
}

// Hit kills the process with SIGKILL if the armed point is name and it has
// been passed its count of times already.
func Hit(name string) {
	p := armed.Load()
	if p == nil || p.name != name {
		return
	}
	if p.left.Add(-1) >= 0 {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not caught; wait for it
}

// Killed reports whether err, from waiting for a child process, is the
// exit of a process killed by SIGKILL, as a crash point kills it.
func Killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
