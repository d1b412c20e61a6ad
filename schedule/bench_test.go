package schedule_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/schedule"
)

func BenchmarkNext(b *testing.B) {
	for _, spec := range []string{
		"every 15m",
		"*/15 * * * *",
		"30 9 * * MON-FRI",
		"daily at 02:30 in Europe/Paris",
		"0 0 29 2 *",
	} {
		s := schedule.MustParse(spec)
		at := time.Date(2024, 5, 15, 10, 7, 13, 0, time.UTC)
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Next(at)
			}
		})
	}
}
