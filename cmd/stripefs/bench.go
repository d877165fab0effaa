package main

import "github.com/spf13/cobra"

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks"}
	return cmd
}

func loopbackCmd() *cobra.Command {
	return &cobra.Command{Use: "loopback", Hidden: true}
}
