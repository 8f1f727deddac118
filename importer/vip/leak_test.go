package vip

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The fake MCS clientset the index tests and benchmark start informers
	// on cannot stream lists (WatchList): its informers list and watch.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	goleak.VerifyTestMain(m)
}
