package faultproxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/ledger"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

type effectArgs struct {
	N int `json:"n"`
}

func (effectArgs) Kind() string { return "faultproxy.effect" }

// The engine on PostgreSQL keeps working while its connections are cut
// again and again and restored, without a restart: every job completes,
// and each job's effect, through the ledger, happens once.
func TestEngineRidesOutCutConnections(t *testing.T) {
	ctx := context.Background()
	st, p, raw := teststore.PostgresBehindProxy(t, "faultproxy_", 8)
	schema := st.Schema()

	var (
		mu      sync.Mutex
		effects = map[string]int{} // the external system: effect key → times done
	)
	led := ledger.New(st.Executor(), nil, slog.New(slog.DiscardHandler))
	ws := weir.NewWorkers()
	err := weir.AddWorker(ws, weir.WorkFunc(func(ctx context.Context, j *weir.Job[effectArgs]) error {
		key := fmt.Sprint("job-", j.Args.N)
		_, err := led.Do(ctx, store.EffectKey{Txn: key}, ledger.Effect{
			Run: func(context.Context) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				effects[key]++
				return key, nil
			},
			Check: func(context.Context) (string, bool, error) {
				mu.Lock()
				defer mu.Unlock()
				return key, effects[key] > 0, nil
			},
		})
		return err
	}), weir.KindConfig{MaxAttempts: 100, Backoff: backoff.Constant(20 * time.Millisecond).WithJitter(backoff.JitterNone)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: st, Workers: ws, ID: "faulty", PollEvery: 20 * time.Millisecond,
		LeaseFor: 5 * time.Second, HeartbeatEvery: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var params []weir.InsertManyParams
	for i := range n {
		params = append(params, weir.InsertManyParams{Args: effectArgs{N: i}})
	}
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}()

	// Cut the connections ten times while the jobs run.
	cuts := 0
	eventually.True(t, fmt.Sprintf("all %d jobs completed", n), 2*time.Minute, func() (bool, string) {
		done, err := countCompleted(ctx, raw, schema)
		if err != nil {
			t.Fatal(err)
		}
		if done < n && cuts < 10 {
			p.Cut()
			time.Sleep(150 * time.Millisecond)
			p.Restore()
			cuts++
		}
		return done == n, fmt.Sprintf("%d completed, %d cuts", done, cuts)
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if k := fmt.Sprint("job-", i); effects[k] != 1 {
			t.Fatalf("the effect of %s happened %d times, want once", k, effects[k])
		}
	}
	t.Logf("%d jobs completed through %d cuts, each effect once", n, cuts)
}

// countCompleted counts the completed jobs over a connection of its own,
// past the proxy.
func countCompleted(ctx context.Context, raw, schema string) (int, error) {
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".weir_jobs WHERE state = $1", string(weirtype.StateCompleted)).Scan(&n)
	return n, err
}
