// Package logging sets up the process's log/slog logger from
// --log-level and --log-format. Everything logs through it: slog calls
// with their attributes (target, client, fid, xid), the standard log
// package's lines (as Info records: slog.SetDefault routes them), and
// Pebble's messages at their levels (storeguard's logger).
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Setup makes slog's default logger write to w at level ("debug",
// "info", "warn", "error") in format ("text" or "json").
func Setup(w io.Writer, level, format string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text", "":
		h = &lineHandler{w: w, mu: new(sync.Mutex), level: lv}
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return fmt.Errorf("--log-format %q: want text or json", format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}

// Target is the attribute that names a target in log records, as Lustre
// names targets: MDT0000, OST0001.
func Target(name string) slog.Attr { return slog.String("target", name) }

// lineHandler writes a record as the standard log package writes a
// line (date, time, level, the message as it is), then its attributes
// as key=value: what people read in a terminal and grep for, where
// slog's TextHandler would quote and escape the message.
type lineHandler struct {
	w      io.Writer
	mu     *sync.Mutex
	level  slog.Level
	prefix string // attributes of WithAttrs, already formatted
	group  string
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.Format("2006/01/02 15:04:05.000000 "))
	if r.Level != slog.LevelInfo {
		b.WriteString(r.Level.String())
		b.WriteByte(' ')
	}
	b.WriteString(r.Message)
	b.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	})
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range as {
		appendAttr(&b, h.group, a)
	}
	h2 := *h
	h2.prefix += b.String()
	return &h2
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	h2 := *h
	h2.group += name + "."
	return &h2
}

func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			appendAttr(b, group+a.Key+".", g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(group + a.Key)
	b.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}
