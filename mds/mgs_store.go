package mds

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/wire"
)

// mgsStore keeps MDT0's management service's cluster map (package mgs)
// in MDT0's database, under keyConfig.
type mgsStore struct{ m *MDT }

func (s mgsStore) Load() (proto.Config, bool, error) {
	var cfg proto.Config
	v, closer, err := s.m.db.Get(keyConfig)
	if errors.Is(err, pebble.ErrNotFound) {
		return cfg, false, nil
	} else if err != nil {
		return cfg, false, err
	}
	defer closer.Close()
	if err := wire.Unmarshal(v, &cfg); err != nil {
		return cfg, false, fmt.Errorf("corrupt cluster map: %w", err)
	}
	return cfg, true, nil
}

func (s mgsStore) Save(cfg *proto.Config) error {
	b := s.m.db.NewBatch()
	b.Set(keyConfig, encode(cfg), nil)
	return s.m.commit(b, true)
}
