package metrics

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// Counters are named and typed by Prometheus's conventions.
func TestCounterNames(t *testing.T) {
	for _, tc := range []struct {
		side, name string
		want       string
		gauge      bool
	}{
		{"ost", "fiemap_calls", "stripefs_ost_fiemap_calls_total", false},
		{"ost", "space_used_bytes_now", "stripefs_ost_space_used_bytes", true},
		{"mdt", "ldlm_callback_wait_us_total", "stripefs_mdt_ldlm_callback_wait_us_total", false},
		{"client", "dirty_bytes", "stripefs_client_dirty_bytes", true},
		{"client", "bad-name.x", "stripefs_client_bad_name_x_total", false},
	} {
		m := counterMetric(tc.side, Counter{Name: tc.name, Value: 7}, []string{"target"}, []string{"X"})
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		desc := m.Desc().String()
		if !strings.Contains(desc, `fqName: "`+tc.want+`"`) {
			t.Errorf("%s: %s, want %s", tc.name, desc, tc.want)
		}
		if (out.Gauge != nil) != tc.gauge || out.GetGauge().GetValue()+out.GetCounter().GetValue() != 7 {
			t.Errorf("%s: gauge %v counter %v, want gauge=%v", tc.name, out.Gauge, out.Counter, tc.gauge)
		}
	}
}
