package timeout_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirhq/weir/resilience/timeout"
)

func TestTimeoutEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := timeout.New(time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Do(context.Background(), func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want a timeout that unwraps to DeadlineExceeded", err)
		}
		var te *timeout.Error
		if !errors.As(err, &te) || te.After != time.Millisecond {
			t.Fatalf("got %#v", err)
		}
	})
}

func TestCallerCancellationIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := timeout.New(time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		err := p.Do(ctx, func(ctx context.Context) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		if errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want the caller's context.Canceled", err)
		}
	})
}

func TestCallerDeadlineShorterThanTimeoutIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := timeout.New(time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		err := p.Do(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if errors.Is(err, timeout.ErrTimeout) {
			t.Fatalf("got %v: the caller's own deadline is not the policy's timeout", err)
		}
	})
}

func TestFastCallPassesThrough(t *testing.T) {
	p, _ := timeout.New(time.Hour)
	boom := errors.New("boom")
	if err := p.Do(context.Background(), func(context.Context) error { return boom }); err != boom {
		t.Fatalf("got %v, want the function's own error", err)
	}
	if err := p.Do(context.Background(), func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline on the call's context")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesNonPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := timeout.New(d); err == nil {
			t.Errorf("New(%v) accepted", d)
		}
	}
}
