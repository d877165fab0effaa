package logging

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"
)

func TestSetup(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	var buf bytes.Buffer
	if err := Setup(&buf, "info", "json"); err != nil {
		t.Fatal(err)
	}
	log.Printf("mdt%d: evicted client %q", 1, "mount:/mnt")
	slog.Debug("hidden")
	slog.Warn("store failed", Target("MDT0001"), slog.String("fid", "[0x1:0x2:0x0]"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "WARN" || rec["target"] != "MDT0001" || rec["fid"] != "[0x1:0x2:0x0]" {
		t.Errorf("record %v", rec)
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec["msg"] != `mdt1: evicted client "mount:/mnt"` {
		t.Errorf("the log package's line as a record: %v %v", rec, err)
	}

	buf.Reset()
	if err := Setup(&buf, "debug", "text"); err != nil {
		t.Fatal(err)
	}
	log.Printf(`evicted client %q`, "mount:/mnt")
	slog.With(Target("OST0000")).Error("write failed", "err", "no space left")
	out := buf.String()
	if !strings.Contains(out, ` evicted client "mount:/mnt"`+"\n") || !strings.Contains(out, ` ERROR write failed target=OST0000 err="no space left"`) {
		t.Errorf("text lines:\n%s", out)
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if err := Setup(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("Setup(%q, %q) took it", bad[0], bad[1])
		}
	}
}
