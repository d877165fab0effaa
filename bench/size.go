package bench

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// sizeUnits maps a lower-cased suffix to its multiplier. K, M, G, T with
// or without "iB" are binary (as IOR's -t 1m and -b 1g are); kB, MB, GB, TB
// are decimal.
var sizeUnits = map[string]uint64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseSize parses a byte count such as "4096", "64MiB", "1g", "1.5GiB" or
// "10MB". K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024; kB/MB/GB/TB are
// powers of 1000. Negative, fractional-byte and overflowing sizes are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)", s, t[i:])
	}
	if strings.Contains(num, ".") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("size %q: bad number %q", s, num)
		}
		v := f * float64(mult)
		if v >= math.MaxInt64/2 {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		if v != math.Trunc(v) {
			return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
		}
		return int64(v), nil
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(lo), nil
}

// FormatSize prints n with the largest binary unit that divides it
// exactly, falling back to one decimal place: 1GiB, 64MiB, 1.5GiB, 1000B.
func FormatSize(n int64) string {
	units := []struct {
		name string
		v    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.v && n%u.v == 0 {
			return fmt.Sprintf("%d%s", n/u.v, u.name)
		}
	}
	for _, u := range units {
		if n >= u.v {
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.v), u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}
