package members

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Record is what one importer (one leader after another) knows of its
// members, kept outside the process so that the next process or leader
// term goes on from it: the grace period of a member that went away runs
// from when it went away, not from the new process's start; a withdrawn
// member is not held again; a disruption's limit counts from when it
// began; and a member's cluster ID survives its ClusterProperty's loss
// across restarts.
type Record struct {
	// Members by kubeconfig context.
	Members map[string]RecordedMember `json:"members"`
	// DisruptedSince is when the current disruption began (nil: none);
	// LimitReached that it has lasted MaxDisruption, and the grace
	// periods were moved on by that much already.
	DisruptedSince *time.Time `json:"disruptedSince,omitempty"`
	LimitReached   bool       `json:"limitReached,omitempty"`
}

// RecordedMember is one member's entry in a Record.
type RecordedMember struct {
	// Cluster is the cluster ID it last joined with and IDSource where
	// that came from ("" when it never joined).
	Cluster  string `json:"cluster,omitempty"`
	IDSource string `json:"idSource,omitempty"`
	// State is up, unreachable, down or unknown, since Since (for
	// unreachable and unknown: the start of the grace period, moved on by
	// the disruptions since).
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// ClusterSetIPs are the clusterset-CIDR VIPs its imports held when
	// it was last seen, kept while it is not Up.
	ClusterSetIPs []RecordedClaim `json:"clusterSetIPs,omitempty"`
}

// RecordedClaim is one import's clusterset-CIDR VIP(s) in one member: its
// mcs-dns.io/clusterset-ip annotation and its creation time there (the
// claim's priority).
type RecordedClaim struct {
	Key   string    `json:"key"`
	IPs   string    `json:"ips"`
	Since time.Time `json:"since"`
}

// AwayClaims are the clusterset-CIDR VIPs recorded for a member that has
// not joined in this process (down, or not reached yet): what its imports
// held when an earlier process last saw it.
type AwayClaims struct {
	Context, Cluster string
	Claims           []RecordedClaim
}

// maxRecordedClaims bounds the claims kept per member, so that the Record
// stays well within a ConfigMap's 1 MiB (about 100 bytes each).
const maxRecordedClaims = 4000

// RecordStore keeps a Record.
type RecordStore interface {
	// Load returns the Record kept, an empty one when none is.
	Load(ctx context.Context) (Record, error)
	// Save replaces the Record kept.
	Save(ctx context.Context, r Record) error
	// Where names the place, for logs.
	Where() string
}

// ConfigMapStore keeps a Record in a ConfigMap (key members.json).
type ConfigMapStore struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// Cluster names the cluster it lives in, for logs.
	Cluster string
}

const recordKey = "members.json"

// Where implements RecordStore.
func (s ConfigMapStore) Where() string {
	return fmt.Sprintf("ConfigMap %s/%s (%s)", s.Namespace, s.Name, s.Cluster)
}

// Load implements RecordStore.
func (s ConfigMapStore) Load(ctx context.Context) (Record, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Record{}, nil
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if raw := cm.Data[recordKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return Record{}, fmt.Errorf("%s: %s is not a member record: %w", s.Where(), recordKey, err)
		}
	}
	return r, nil
}

// Save implements RecordStore.
func (s ConfigMapStore) Save(ctx context.Context, r Record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	cm, err := cms.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "mcs-importer"}},
			Data: map[string]string{recordKey: string(raw)},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cm.Data[recordKey] == string(raw) {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[recordKey] = string(raw)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// record returns what the Set knows now, as a Record (under mu).
func (s *Set) record() Record {
	r := Record{Members: map[string]RecordedMember{}}
	for _, sl := range s.slots {
		e := RecordedMember{Cluster: sl.knownID, IDSource: sl.knownIDSource}
		switch m := sl.member; {
		case m != nil:
			e.State = m.State().String()
			e.Since = m.unreachableSince()
			switch c := m.Caches(); {
			case m.State() == Up:
				sl.claims = nil // read live
			case c != nil:
				sl.claims = cacheClaims(c) // its last known state
			}
		case sl.expired:
			e.State, e.Since = Down.String(), sl.awaySince
		default:
			e.State, e.Since = Unknown.String(), sl.awaySince
		}
		e.Since = e.Since.UTC().Truncate(time.Millisecond)
		e.ClusterSetIPs = sl.claims
		r.Members[sl.cfg.Context] = e
	}
	s.publishAway()
	if s.disrupted {
		d := s.disruptedAt.UTC().Truncate(time.Millisecond)
		r.DisruptedSince, r.LimitReached = &d, s.overLimit
	}
	return r
}

// restore takes a Record kept by an earlier process in (under mu, before
// the members are joined): a member recorded as unreachable, or not seen
// yet, keeps the start of its grace period; one recorded as withdrawn is
// not held again (what came from it was withdrawn then); every recorded
// cluster ID is known, so that a lost ClusterProperty does not rename the
// member. A member recorded as up starts its grace period now: the
// earlier process saw it until it ended.
func (s *Set) restore(r Record, now time.Time) {
	for _, sl := range s.slots {
		e, ok := r.Members[sl.cfg.Context]
		if !ok {
			continue
		}
		if e.Cluster != "" && e.IDSource != idKept {
			sl.knownID, sl.knownIDSource = e.Cluster, e.IDSource
		} else if e.Cluster != "" {
			sl.knownID, sl.knownIDSource = e.Cluster, idFromProperty
		}
		if e.State != Up.String() && e.Cluster != "" {
			sl.claims = e.ClusterSetIPs
		}
		switch e.State {
		case Unreachable.String(), Unknown.String():
			if !e.Since.IsZero() && e.Since.Before(now) {
				sl.awaySince = e.Since
				sl.restoredAway = true
			}
		case Down.String():
			sl.expired = true
		}
	}
	// A disruption goes on (the first decision tells whether it still
	// does); the time it lasted is taken off the restored grace periods
	// when it ends, as in the process that saw it begin.
	if r.DisruptedSince != nil && r.DisruptedSince.Before(now) {
		s.disrupted, s.disruptedAt, s.overLimit = true, *r.DisruptedSince, r.LimitReached
	}
	s.rebuild()
	s.publishAway()
}

// cacheClaims are the clusterset-CIDR VIPs the imports of a member's
// caches hold, oldest first, at most maxRecordedClaims.
func cacheClaims(c *Caches) []RecordedClaim {
	var out []RecordedClaim
	for _, si := range c.OwnedImports() {
		if ips := si.Annotations[mcsapi.AnnotationClusterSetIP]; ips != "" {
			out = append(out, RecordedClaim{Key: si.Namespace + "/" + si.Name, IPs: ips,
				Since: si.CreationTimestamp.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b RecordedClaim) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(out) > maxRecordedClaims {
		out = out[:maxRecordedClaims]
	}
	return out
}

// publishAway makes the claims recorded for members not joined in this
// process readable lock-free (AwayClaims). Called with mu held.
func (s *Set) publishAway() {
	var away []AwayClaims
	for _, sl := range s.slots {
		if sl.member == nil && len(sl.claims) > 0 && sl.knownID != "" {
			away = append(away, AwayClaims{Context: sl.cfg.Context, Cluster: sl.knownID, Claims: sl.claims})
		}
	}
	s.away.Store(&away)
}

// AwayClaims returns the clusterset-CIDR VIPs an earlier process recorded
// for the members that have not joined in this one (lock-free).
func (s *Set) AwayClaims() []AwayClaims {
	if p := s.away.Load(); p != nil {
		return *p
	}
	return nil
}

// recordLoop saves the Record whenever the Set signals a change, until
// ctx is done; a failed save is retried with back-off (the importer works
// on meanwhile: only a later process would start its holds afresh).
func (s *Set) recordLoop(ctx context.Context) {
	store := s.o.Store
	log := s.o.Log.With("record", store.Where())
	var saved *Record
	failing := false
	bo := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		s.mu.Lock()
		r := s.record()
		s.mu.Unlock()
		if saved == nil || !recordsEqual(*saved, r) {
			sctx, cancel := context.WithTimeout(ctx, s.o.ConnectTimeout)
			err := store.Save(sctx, r)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if !failing {
					log.Warn("cannot save the members' states; a later process or leader would start their grace periods afresh", "err", err)
				}
				failing = true
				if s.o.OnRecordError != nil {
					s.o.OnRecordError(err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(bo.Step()):
				}
				continue
			}
			if failing {
				log.Info("members' states saved again")
			}
			failing, saved = false, &r
			bo.Duration = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-s.recordDirty:
		}
	}
}

// markDirty asks recordLoop to save (never blocks).
func (s *Set) markDirty() {
	select {
	case s.recordDirty <- struct{}{}:
	default:
	}
}

func recordsEqual(a, b Record) bool {
	if a.LimitReached != b.LimitReached || (a.DisruptedSince == nil) != (b.DisruptedSince == nil) ||
		(a.DisruptedSince != nil && !a.DisruptedSince.Equal(*b.DisruptedSince)) {
		return false
	}
	return maps.EqualFunc(a.Members, b.Members, func(x, y RecordedMember) bool {
		return x.Cluster == y.Cluster && x.IDSource == y.IDSource && x.State == y.State && x.Since.Equal(y.Since) &&
			slices.EqualFunc(x.ClusterSetIPs, y.ClusterSetIPs, func(a, b RecordedClaim) bool {
				return a.Key == b.Key && a.IPs == b.IPs && a.Since.Equal(b.Since)
			})
	})
}

// loadRecord reads the Record before the members are joined; when it
// cannot be read, the holds start now, as without one (and it is
// overwritten once saving works).
func (s *Set) loadRecord(ctx context.Context) {
	store := s.o.Store
	lctx, cancel := context.WithTimeout(ctx, s.o.ConnectTimeout)
	r, err := store.Load(lctx)
	cancel()
	now := s.o.now()
	if err != nil {
		s.o.Log.Warn("cannot read the members' states an earlier process saved; grace periods of members not seen yet start now",
			"record", store.Where(), "err", err)
		if s.o.OnRecordError != nil {
			s.o.OnRecordError(err)
		}
		return
	}
	s.mu.Lock()
	s.restore(r, now)
	s.mu.Unlock()
	var held []any
	for ctxName, e := range r.Members {
		if e.State != Up.String() {
			held = append(held, slog.Group(ctxName, "state", e.State, "since", e.Since))
		}
	}
	if len(r.Members) > 0 {
		s.o.Log.Info("went on from the members' states an earlier process saved", append([]any{"record", store.Where()}, held...)...)
	}
}
