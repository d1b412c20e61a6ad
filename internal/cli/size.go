package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of a size in bytes: a whole number, with an optional
// unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024),
// in any case: 32MiB, 500KB, 1048576.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"b", 1},
}

func (b *byteSize) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(num), u.n
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("want a size such as 32MiB, 500KB or 1048576 (bytes)")
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
