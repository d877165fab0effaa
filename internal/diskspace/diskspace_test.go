package diskspace

import "testing"

func TestReserve(t *testing.T) {
	for _, tc := range []struct {
		in    string
		ok    bool
		share float64
	}{
		{"2%", true, 0.02}, {"0%", true, 0}, {"50%", true, 0.5}, {" 7.5% ", true, 0.075},
		{"2", false, 0}, {"-1%", false, 0}, {"51%", false, 0}, {"lots%", false, 0}, {"", false, 0},
	} {
		var r Reserve
		err := r.Set(tc.in)
		if (err == nil) != tc.ok || (tc.ok && r.Share != tc.share) {
			t.Errorf("Set(%q) = %v, share %v; want ok=%v share %v", tc.in, err, r.Share, tc.ok, tc.share)
		}
	}
	r := Reserve{Share: 0.02}
	if got := r.Of(100 << 20); got != MinReserve {
		t.Errorf("2%% of 100 MiB keeps %d, want the minimum %d", got, MinReserve)
	}
	var ten uint64 = 10 << 30
	if got, want := r.Of(ten), uint64(float64(ten)*0.02); got != want {
		t.Errorf("2%% of 10 GiB keeps %d, want %d", got, want)
	}
	if _, err := r.Usable("/no/such/dir"); err == nil {
		t.Error("Usable of a missing directory did not fail")
	}
}
