package mgs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// cacheFor is how long a Client answers from its last copy of the map:
// targets register rarely, and an MDT reads the map on many requests.
const cacheFor = 5 * time.Second

// Client reads the cluster map from the MGS for a server that is not
// MDT0, and keeps a copy: fresh for cacheFor, and served stale while the
// MGS cannot be reached.
type Client struct {
	conn *rpc.Client
	mu   sync.Mutex
	last *proto.Config // under mu
	at   time.Time     // when last was fetched
}

// NewClient connects, as the server name, to the MGS at addr.
func NewClient(addr, name string) *Client {
	c := rpc.NewClient(addr, name)
	c.Role = rpc.RoleServer
	return &Client{conn: c}
}

// Conn is the connection to the MGS, for the other services it answers
// (nodemaps).
func (c *Client) Conn() *rpc.Client { return c.conn }

// Config returns the map, fetched again once the copy is cacheFor old.
func (c *Client) Config(ctx context.Context) (*proto.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.at) < cacheFor {
		return c.last, nil
	}
	cfg, err := rpc.Invoke[proto.Config](ctx, c.conn, proto.GConfig, &proto.Empty{})
	if err != nil {
		if c.last != nil {
			return c.last, nil
		}
		return nil, fmt.Errorf("fetch cluster map: %w", err)
	}
	c.last, c.at = cfg, time.Now()
	return cfg, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
