package importer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// errLostLeadership ends Run when another replica took the Lease over:
// the process exits and is restarted as a candidate, the usual pattern for
// Kubernetes controllers (nothing of the old term survives in memory).
var errLostLeadership = errors.New("lost leadership")

// runElected runs work only while this process holds the leader Lease
// (client-go leaderelection) in the cluster leaseConfig names.
func runElected(ctx context.Context, o Options, log *slog.Logger, work func(context.Context) error) error {
	cfg, where, err := leaseConfig(o)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "mcs-importer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("leader election (%s): %w", where, err)
	}
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	identity := fmt.Sprintf("%s_%s", host, hex.EncodeToString(suffix))
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.LeaderElectNamespace, Name: o.LeaderElectName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	electCtx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	// client-go starts OnStartedLeading in a goroutine and does not wait
	// for it; term makes sure work has wound down before Run returns.
	var (
		termMu  sync.Mutex
		ended   bool
		term    sync.WaitGroup
		workErr error
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          "mcs-importer",
		LeaseDuration: o.LeaseDuration,
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		// The Lease is released by hand once the term's work has
		// returned (release below): client-go's ReleaseOnCancel gives it
		// up as soon as the context is cancelled, while the last writes
		// are still in flight, and a standby could start writing then.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				termMu.Lock()
				if ended {
					termMu.Unlock()
					return
				}
				term.Add(1)
				termMu.Unlock()
				defer term.Done()
				log.Info("leading", "identity", identity, "lease", o.LeaderElectNamespace+"/"+o.LeaderElectName, "leaseIn", where)
				if workErr = work(lctx); workErr != nil {
					stopElection() // give the Lease up rather than hold it idle
				}
			},
			OnStoppedLeading: func() { log.Info("stopped leading", "identity", identity) },
			OnNewLeader: func(current string) {
				if current != identity {
					log.Info("another replica leads; standing by", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	log.Info("waiting for the leader Lease", "identity", identity, "lease", o.LeaderElectNamespace+"/"+o.LeaderElectName, "leaseIn", where)
	le.Run(electCtx) // returns when ctx is done, leadership is lost or work failed
	termMu.Lock()
	ended = true
	termMu.Unlock()
	term.Wait() // the term's context is cancelled by now
	release(o, lock, identity, log)
	if workErr != nil {
		return workErr
	}
	if ctx.Err() == nil {
		return errLostLeadership
	}
	return nil
}

// release gives the Lease up, if this process still holds it, so that a
// standby takes over at once instead of after the lease duration: as
// client-go's own release does, a record with no holder that expires in
// a second. It is called only after every write of the term has
// returned. A failure is logged: the Lease then expires by itself.
func release(o Options, lock *resourcelock.LeaseLock, identity string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), o.RenewDeadline)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil {
		log.Warn("cannot read the leader Lease to release it; it expires by itself", "err", err)
		return
	}
	if rec.HolderIdentity != identity {
		return // not ours (any more)
	}
	now := metav1.Now()
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
	if err != nil {
		log.Warn("cannot release the leader Lease; it expires by itself", "err", err)
		return
	}
	log.Info("released the leader Lease", "identity", identity)
}

// leaseConfig says where the leader Lease lives: the cluster the flags
// name; else, in a pod, the pod's own cluster (where a controller's Lease
// usually lives, so that losing a member does not stop the election);
// else the first member.
func leaseConfig(o Options) (*rest.Config, string, error) {
	if o.LeaderElectKubeconfig != "" || o.LeaderElectContext != "" {
		path := o.LeaderElectKubeconfig
		if path == "" {
			path = o.Kubeconfig
		}
		cfg, err := members.LoadConfig(path, o.LeaderElectContext)
		if err != nil {
			return nil, "", fmt.Errorf("--leader-elect-kubeconfig/--leader-elect-context: %w", err)
		}
		where := "context " + o.LeaderElectContext
		if o.LeaderElectContext == "" {
			where = "current context of " + path
		}
		return cfg, where, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, "in-cluster", nil
	}
	cfg, err := members.LoadConfig(o.Kubeconfig, o.Contexts[0])
	if err != nil {
		return nil, "", err
	}
	return cfg, "context " + o.Contexts[0], nil
}

// memberRecord returns the store of the members' states that --member-record
// names (nil: none), in the cluster the Lease lives in, and that cluster's
// name for logs and metrics.
func memberRecord(o Options) (members.RecordStore, string, error) {
	ns, name := o.LeaderElectNamespace, o.LeaderElectName+"-members"
	switch o.MemberRecord {
	case "none":
		return nil, "", nil
	case "":
		if !o.LeaderElect {
			return nil, "", nil
		}
	default:
		ns, name, _ = strings.Cut(o.MemberRecord, "/")
	}
	cfg, where, err := leaseConfig(o)
	if err != nil {
		return nil, "", fmt.Errorf("--member-record: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "mcs-importer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("--member-record (%s): %w", where, err)
	}
	return members.ConfigMapStore{Client: client, Namespace: ns, Name: name, Cluster: where}, where, nil
}
