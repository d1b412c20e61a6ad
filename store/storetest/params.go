package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// testBadParamsRefusedAlike: every call checks its parameters with the
// store's checks before it reads or writes, so that each driver refuses
// the same calls, with an error wrapping store.ErrInvalid that carries
// the check's own words (the driver only adds the name of its call).
func testBadParamsRefusedAlike(t *testing.T, h Harness) {
	s := migrated(t, h)
	ex := s.Executor()
	ctx := context.Background()
	var zero time.Time
	ok := store.Lease{ID: 1, Owner: "w", Attempt: 1}
	noOwner := store.Lease{ID: 2, Attempt: 1}
	attempt0 := store.Lease{ID: 1, Owner: "w"}
	claimP := store.ClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: lease}
	outboxP := store.OutboxClaimParams{Now: now, Limit: 1, Owner: "w", LeaseFor: lease}
	wf := store.WorkflowParams{ID: "wf", Name: "n", State: "s"}
	adv := store.AdvanceParams{ID: "wf", Version: 1, State: "s"}
	big := make([]byte, weirtype.MaxWorkflowData+1)
	with := func(f func(*store.ClaimParams)) store.ClaimParams { p := claimP; f(&p); return p }
	withOutbox := func(f func(*store.OutboxClaimParams)) store.OutboxClaimParams { p := outboxP; f(&p); return p }
	withWF := func(f func(*store.WorkflowParams)) store.WorkflowParams { p := wf; f(&p); return p }
	withAdv := func(f func(*store.AdvanceParams)) store.AdvanceParams { p := adv; f(&p); return p }
	_, badJobFilter := store.JobFilter{Limit: -1}.Normalize()
	cases := []struct {
		name string
		err  error // the call's
		want error // the store check whose words it must carry
	}{
		{"claim limit 0", errOf(ex.Claim(ctx, with(func(p *store.ClaimParams) { p.Limit = 0 }))), store.CheckLimit(0)},
		{"claim without owner", errOf(ex.Claim(ctx, with(func(p *store.ClaimParams) { p.Owner = "" }))), store.CheckOwner("")},
		{"claim without lease", errOf(ex.Claim(ctx, with(func(p *store.ClaimParams) { p.LeaseFor = 0 }))), store.CheckLeaseFor(0)},
		{"claim at the zero time", errOf(ex.Claim(ctx, with(func(p *store.ClaimParams) { p.Now = zero }))), store.CheckNow(zero)},
		{"heartbeat without owner", errOf(ex.Heartbeat(ctx, now, []store.Lease{ok, noOwner}, lease)), noOwner.Validate()},
		{"heartbeat at attempt 0", errOf(ex.Heartbeat(ctx, now, []store.Lease{attempt0}, lease)), attempt0.Validate()},
		{"heartbeat without lease", errOf(ex.Heartbeat(ctx, now, []store.Lease{ok}, 0)), store.CheckLeaseFor(0)},
		{"heartbeat at the zero time", errOf(ex.Heartbeat(ctx, zero, []store.Lease{ok}, lease)), store.CheckNow(zero)},
		{"complete without owner", errOf(ex.Complete(ctx, now, noOwner)), noOwner.Validate()},
		{"complete at attempt 0", errOf(ex.Complete(ctx, now, attempt0)), attempt0.Validate()},
		{"complete at the zero time", errOf(ex.Complete(ctx, zero, ok)), store.CheckNow(zero)},
		{"complete many without owner", errOf(ex.CompleteMany(ctx, now, []store.Lease{ok, noOwner})), noOwner.Validate()},
		{"complete many at the zero time", errOf(ex.CompleteMany(ctx, zero, []store.Lease{ok})), store.CheckNow(zero)},
		{"fail without owner", errOf(ex.Fail(ctx, store.FailParams{Now: now, Lease: noOwner})), noOwner.Validate()},
		{"fail at attempt -1", errOf(ex.Fail(ctx, store.FailParams{Now: now, Lease: store.Lease{ID: 1, Owner: "w", Attempt: -1}})),
			store.Lease{ID: 1, Owner: "w", Attempt: -1}.Validate()},
		{"fail for an unknown reason", errOf(ex.Fail(ctx, store.FailParams{Now: now, Lease: ok, Abandon: "bored"})),
			store.FailParams{Now: now, Lease: ok, Abandon: "bored"}.Validate()},
		{"fail at the zero time", errOf(ex.Fail(ctx, store.FailParams{Lease: ok})), store.CheckNow(zero)},
		{"snooze without owner", errOf(ex.Snooze(ctx, now, noOwner, now)), noOwner.Validate()},
		{"snooze until the zero time", errOf(ex.Snooze(ctx, now, ok, zero)), store.CheckSet("until", zero)},
		{"cancel at the zero time", errOf(ex.Cancel(ctx, zero, 1)), store.CheckNow(zero)},
		{"rescue limit 0", errOf2(ex.RescueExpired(ctx, now, 0)), store.CheckLimit(0)},
		{"rescue at the zero time", errOf2(ex.RescueExpired(ctx, zero, 1)), store.CheckNow(zero)},
		{"release without owner", errOf(ex.ReleaseOwned(ctx, now, "", true)), store.CheckOwner("")},
		{"release at the zero time", errOf(ex.ReleaseOwned(ctx, zero, "w", true)), store.CheckNow(zero)},
		{"release except without owner", errOf(ex.ReleaseOwnedExcept(ctx, now, "", nil)), store.CheckOwner("")},
		{"release except keeping a bad lease", errOf(ex.ReleaseOwnedExcept(ctx, now, "w", []store.Lease{attempt0})), attempt0.Validate()},
		{"expire limit 0", errOf(ex.ExpireDeadlines(ctx, now, 0)), store.CheckLimit(0)},
		{"expire at the zero time", errOf(ex.ExpireDeadlines(ctx, zero, 1)), store.CheckNow(zero)},
		{"complete late without owner", errOf2(ex.CompleteLate(ctx, now, noOwner)), store.CheckOwner("")},
		{"complete late at the zero time", errOf2(ex.CompleteLate(ctx, zero, ok)), store.CheckNow(zero)},
		{"list late results limit -1", errOf(ex.ListLateResults(ctx, store.LateResultFilter{Limit: -1})), store.LateResultFilter{Limit: -1}.Validate()},
		{"accept late result at the zero time", errOf(ex.AcceptLateResult(ctx, zero, 1)), store.CheckNow(zero)},
		{"list stuck limit 0", errOf(ex.ListStuck(ctx, now, 0)), store.CheckLimit(0)},
		{"list stuck before the zero time", errOf(ex.ListStuck(ctx, zero, 1)), store.CheckSet("before", zero)},
		{"count jobs before the zero time", errOf(ex.CountJobs(ctx, zero)), store.CheckSet("before", zero)},
		{"list dead letters limit -1", errOf(ex.ListDeadLetters(ctx, store.DeadLetterFilter{Limit: -1})), store.DeadLetterFilter{Limit: -1}.Validate()},
		{"list dead letters of an unknown reason", errOf(ex.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: "bored"})),
			store.DeadLetterFilter{Reason: "bored"}.Validate()},
		{"list dead letters of job -1", errOf(ex.ListDeadLetters(ctx, store.DeadLetterFilter{JobID: -1})), store.DeadLetterFilter{JobID: -1}.Validate()},
		{"requeue at the zero time", errOf(ex.RequeueDeadLetters(ctx, zero, store.DeadLetterFilter{})), store.CheckNow(zero)},
		{"requeue of an unknown reason", errOf(ex.RequeueDeadLetters(ctx, now, store.DeadLetterFilter{Reason: "bored"})),
			store.DeadLetterFilter{Reason: "bored"}.Validate()},
		{"purge of an unknown reason", errOf(ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{Reason: "bored"})),
			store.DeadLetterFilter{Reason: "bored"}.Validate()},
		{"purge of job -1", errOf(ex.PurgeDeadLetters(ctx, store.DeadLetterFilter{JobID: -1})), store.DeadLetterFilter{JobID: -1}.Validate()},
		{"list jobs limit -1", errOf(ex.ListJobs(ctx, store.JobFilter{Limit: -1})), badJobFilter},
		{"retry job at the zero time", errOf(ex.RetryJob(ctx, zero, 1)), store.CheckNow(zero)},
		{"add to the outbox without a topic", errOf(ex.AddOutbox(ctx, now, []store.OutboxMessage{{Topic: "t"}, {Payload: []byte("x")}})),
			store.OutboxMessage{}.Validate()},
		{"add to the outbox at the zero time", errOf(ex.AddOutbox(ctx, zero, []store.OutboxMessage{{Topic: "t"}})), store.CheckNow(zero)},
		{"claim the outbox limit 0", errOf(ex.ClaimOutbox(ctx, withOutbox(func(p *store.OutboxClaimParams) { p.Limit = 0 }))), store.CheckLimit(0)},
		{"claim the outbox without owner", errOf(ex.ClaimOutbox(ctx, withOutbox(func(p *store.OutboxClaimParams) { p.Owner = "" }))), store.CheckOwner("")},
		{"claim the outbox without lease", errOf(ex.ClaimOutbox(ctx, withOutbox(func(p *store.OutboxClaimParams) { p.LeaseFor = 0 }))),
			store.CheckLeaseFor(0)},
		{"mark published without owner", errOf(ex.MarkPublished(ctx, now, "", []int64{1})), store.CheckOwner("")},
		{"retry the outbox without owner", errOf(ex.RetryOutbox(ctx, now, "", []int64{1}, "e", now)), store.CheckOwner("")},
		{"release the outbox without owner", errOf(ex.ReleaseOutbox(ctx, now, "", []int64{1})), store.CheckOwner("")},
		{"purge the outbox limit 0", errOf(ex.PurgeOutbox(ctx, now, 0)), store.CheckLimit(0)},
		{"purge the outbox before the zero time", errOf(ex.PurgeOutbox(ctx, zero, 1)), store.CheckSet("before", zero)},
		{"record in the inbox without a topic", errOf(ex.RecordInbox(ctx, now, "", "m")), store.CheckInboxRecord("", "m")},
		{"record in the inbox without an id", errOf(ex.RecordInbox(ctx, now, "t", "")), store.CheckInboxRecord("t", "")},
		{"record in the inbox at the zero time", errOf(ex.RecordInbox(ctx, zero, "t", "m")), store.CheckNow(zero)},
		{"purge the inbox limit 0", errOf(ex.PurgeInbox(ctx, now, 0)), store.CheckLimit(0)},
		{"purge the inbox before the zero time", errOf(ex.PurgeInbox(ctx, zero, 1)), store.CheckSet("before", zero)},
		{"create a workflow without id", errOf2(ex.CreateWorkflow(ctx, now, withWF(func(p *store.WorkflowParams) { p.ID = "" }))),
			withWF(func(p *store.WorkflowParams) { p.ID = "" }).Validate()},
		{"create a workflow without name", errOf2(ex.CreateWorkflow(ctx, now, withWF(func(p *store.WorkflowParams) { p.Name = "" }))),
			withWF(func(p *store.WorkflowParams) { p.Name = "" }).Validate()},
		{"create a workflow with too much data", errOf2(ex.CreateWorkflow(ctx, now, withWF(func(p *store.WorkflowParams) { p.Data = big }))),
			withWF(func(p *store.WorkflowParams) { p.Data = big }).Validate()},
		{"create a workflow at the zero time", errOf2(ex.CreateWorkflow(ctx, zero, wf)), store.CheckNow(zero)},
		{"advance a workflow without id", errOf(ex.AdvanceWorkflow(ctx, now, withAdv(func(p *store.AdvanceParams) { p.ID = "" }))),
			withAdv(func(p *store.AdvanceParams) { p.ID = "" }).Validate()},
		{"advance a workflow from version 0", errOf(ex.AdvanceWorkflow(ctx, now, withAdv(func(p *store.AdvanceParams) { p.Version = 0 }))),
			withAdv(func(p *store.AdvanceParams) { p.Version = 0 }).Validate()},
		{"advance a workflow to an unknown status", errOf(ex.AdvanceWorkflow(ctx, now, withAdv(func(p *store.AdvanceParams) { p.Status = "odd" }))),
			withAdv(func(p *store.AdvanceParams) { p.Status = "odd" }).Validate()},
		{"advance a workflow at the zero time", errOf(ex.AdvanceWorkflow(ctx, zero, adv)), store.CheckNow(zero)},
		{"list workflows limit -1", errOf(ex.ListWorkflows(ctx, store.WorkflowFilter{Limit: -1})), store.WorkflowFilter{Limit: -1}.Validate()},
		{"list workflows of an unknown status", errOf(ex.ListWorkflows(ctx, store.WorkflowFilter{Status: "odd"})),
			store.WorkflowFilter{Status: "odd"}.Validate()},
		{"list transitions after version -1", errOf(ex.ListWorkflowTransitions(ctx, "wf", -1, 0)), store.CheckHistoryPage(-1, 0)},
		{"list transitions limit -1", errOf(ex.ListWorkflowTransitions(ctx, "wf", 0, -1)), store.CheckHistoryPage(0, -1)},
		{"begin an effect without txn", errOf2(ex.BeginEffect(ctx, now, store.EffectKey{})), store.EffectKey{}.Validate()},
		{"begin an effect at ordinal -1", errOf2(ex.BeginEffect(ctx, now, store.EffectKey{Txn: "t", Ordinal: -1})),
			store.EffectKey{Txn: "t", Ordinal: -1}.Validate()},
		{"begin an effect at the zero time", errOf2(ex.BeginEffect(ctx, zero, store.EffectKey{Txn: "t"})), store.CheckNow(zero)},
		{"finish an effect without txn", errOf(ex.FinishEffect(ctx, now, store.EffectKey{}, "r")), store.EffectKey{}.Validate()},
		{"list effects without txn", errOf(ex.ListEffects(ctx, "")), store.CheckTxn("")},
		{"count effects without txn", errOf(ex.CountEffects(ctx, "")), store.CheckTxn("")},
	}
	for _, c := range cases {
		if c.want == nil {
			t.Fatalf("%s: the store's check finds nothing wrong", c.name)
		}
		if !errors.Is(c.err, store.ErrInvalid) || !strings.Contains(c.err.Error(), c.want.Error()) {
			t.Errorf("%s: %v; want ErrInvalid saying %q", c.name, c.err, c.want)
		}
	}
	// Nothing refused was written.
	if n := countJobs(t, h, s); n != 0 {
		t.Fatalf("%d jobs after refused calls, want none", n)
	}
	if wfs, err := ex.ListWorkflows(ctx, store.WorkflowFilter{}); err != nil || len(wfs) != 0 {
		t.Fatalf("workflows after refused calls: %v, %v; want none", wfs, err)
	}
	if b, err := ex.OutboxBacklog(ctx); err != nil || b.Pending != 0 {
		t.Fatalf("outbox after refused calls: %+v, %v; want empty", b, err)
	}
}

// errOf and errOf2 keep the error of a call's results.
func errOf[T any](_ T, err error) error { return err }

func errOf2[T, U any](_ T, _ U, err error) error { return err }
