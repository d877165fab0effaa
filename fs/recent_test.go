package fs

import "testing"

func TestRecentForgetsOldestFirst(t *testing.T) {
	r := newRecent[uint64, int](3)
	for k := uint64(1); k <= 4; k++ {
		r.put(k, int(k)*10)
	}
	r.put(3, 33) // replaced in place: not a new key
	for k, want := range map[uint64]int{2: 20, 3: 33, 4: 40} {
		if v, ok := r.get(k); !ok || v != want {
			t.Errorf("key %d: %d %v, want %d", k, v, ok, want)
		}
	}
	if _, ok := r.get(1); ok {
		t.Error("the oldest key is still remembered past the bound")
	}
	r.put(5, 50)
	if _, ok := r.get(2); ok {
		t.Error("key 2 outlived its turn")
	}
}
