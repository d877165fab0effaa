package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// MaxFiles bounds Meta's file count.
const MaxFiles = 100_000_000

// MetaResult is one create/stat/remove pass over n empty files in one
// directory, each phase timed separately, as mdtest -F does.
type MetaResult struct {
	Dir           string  `json:"dir"`
	Files         int     `json:"files"`
	CreateSeconds float64 `json:"create_seconds"`
	CreateOps     float64 `json:"create_ops_s"`
	StatSeconds   float64 `json:"stat_seconds"`
	StatOps       float64 `json:"stat_ops_s"`
	RemoveSeconds float64 `json:"remove_seconds"`
	RemoveOps     float64 `json:"remove_ops_s"`
}

// Meta creates n empty files in a fresh subdirectory of dir (open
// O_CREAT|O_EXCL, close), then lstats each, then removes each, and
// reports each phase's rate. The subdirectory is removed at the end.
func Meta(ctx context.Context, dir string, n int) (res MetaResult, err error) {
	if n <= 0 || n > MaxFiles {
		return res, fmt.Errorf("meta: file count must be 1 to %d, got %d", MaxFiles, n)
	}
	work, err := os.MkdirTemp(dir, fmt.Sprintf("stripefs-bench-meta.%d.", os.Getpid()))
	if err != nil {
		return res, fmt.Errorf("meta: %w", err)
	}
	res = MetaResult{Dir: dir, Files: n}
	created := 0
	defer func() {
		if err != nil { // leave nothing behind after a failure or cancel
			for i := 0; i < created; i++ {
				_ = os.Remove(metaName(work, i))
			}
		}
		if rerr := os.Remove(work); rerr != nil && err == nil {
			err = fmt.Errorf("meta: %w", rerr)
		}
	}()

	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		f, err := os.OpenFile(metaName(work, i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return res, fmt.Errorf("meta: create: %w", err)
		}
		created++
		if err := f.Close(); err != nil {
			return res, fmt.Errorf("meta: close: %w", err)
		}
	}
	res.CreateSeconds = time.Since(start).Seconds()
	res.CreateOps = opsps(n, res.CreateSeconds)

	start = time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		st, err := os.Lstat(metaName(work, i))
		if err != nil {
			return res, fmt.Errorf("meta: stat: %w", err)
		}
		if !st.Mode().IsRegular() || st.Size() != 0 {
			return res, fmt.Errorf("meta: %s: want an empty regular file, got mode %v size %d", st.Name(), st.Mode(), st.Size())
		}
	}
	res.StatSeconds = time.Since(start).Seconds()
	res.StatOps = opsps(n, res.StatSeconds)

	start = time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := os.Remove(metaName(work, i)); err != nil {
			return res, fmt.Errorf("meta: remove: %w", err)
		}
	}
	created = 0
	res.RemoveSeconds = time.Since(start).Seconds()
	res.RemoveOps = opsps(n, res.RemoveSeconds)
	return res, nil
}

func metaName(dir string, i int) string {
	return filepath.Join(dir, "f."+strconv.Itoa(i))
}

func opsps(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
