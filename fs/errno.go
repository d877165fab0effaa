package fs

import (
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// AnswerErrno is the errno a frontend answers a program with for err (0
// for none). An EIO's cause is logged, which the errno alone never tells
// (Lustre's "LustreError" lines): at most once a second per process, so
// that a dead OST under a reading loop does not flood the log.
func AnswerErrno(err error) syscall.Errno {
	errno := Errno(err)
	if errno == syscall.EIO {
		eioLog.print(err)
	}
	return errno
}

var eioLog rateLog

type rateLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *rateLog) print(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < time.Second {
		l.suppressed++
		return
	}
	if l.suppressed > 0 {
		slog.Error(fmt.Sprintf("EIO: %v (and %d more EIO since the last)", err, l.suppressed), "errno", "EIO", "suppressed", l.suppressed)
	} else {
		slog.Error(fmt.Sprintf("EIO: %v", err), "errno", "EIO")
	}
	l.last, l.suppressed = time.Now(), 0
}
