package stack

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

func TestImporterArgs(t *testing.T) {
	s := &Stack{Kubeconfig: "/k", Names: []string{"east", "west"}}
	got := s.ImporterArgs("", "--vip-mode", "derived-service").Argv()
	want := []string{"--kubeconfig", "/k", "--contexts", "east,west", "--metrics-addr", "", "--vip-mode", "derived-service"}
	if !slices.Equal(got, want) {
		t.Fatalf("Argv() = %q, want %q", got, want)
	}
}

func TestGroupReportsOnlyUnexpectedExits(t *testing.T) {
	g := NewGroup()
	exited := make(chan string, 4)
	g.OnUnexpectedExit(context.Background(), func(p *procs.Process) { exited <- p.Name })
	dies, err := g.Launch("dies", "", "sh", "-c", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := g.Launch("stopped", "", "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-exited:
		if name != "dies" {
			t.Fatalf("reported %s, want dies", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of dies was not reported")
	}
	_ = dies.Wait()
	g.StopAll()
	if !stopped.Exited() {
		t.Fatal("StopAll left a process running")
	}
	select {
	case name := <-exited:
		t.Fatalf("reported %s, which was stopped", name)
	case <-time.After(200 * time.Millisecond):
	}
}
