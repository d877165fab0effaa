package testcluster

import (
	"context"
	"testing"

	"github.com/stripefs/stripefs/cluster"
	"github.com/stripefs/stripefs/fs"
)

// InProc starts mdts MDTs and osts OSTs in this process, on the
// in-process transport (the race detector sees every goroutine), and a
// client connected to them with opts (MGS and Name are filled in); both
// end with the test.
func InProc(t testing.TB, mdts, osts int, opts fs.Options) (*fs.Client, *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Spec{DataDir: t.TempDir(), MDTs: mdts, OSTs: osts, InProc: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	opts.MGS, opts.Name = cl.MGS, t.Name()
	c, err := fs.Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cl
}

// InProcClient connects another client, named after the test and suffix,
// to cl (a second node's); it ends with the test.
func InProcClient(t testing.TB, cl *cluster.Cluster, suffix string) *fs.Client {
	t.Helper()
	c, err := fs.Connect(context.Background(), fs.Options{MGS: cl.MGS, Name: t.Name() + "-" + suffix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
