package mcs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// sharedSources holds the controllers, and the answers they keep, by what
// they watch and how they answer (sourceKey): plugin instances with equal
// keys share one. A Corefile reload that leaves an mcs stanza as it was
// (the usual case: another plugin or server block changed) so hands the
// running informers and answers to the new instance, which never answers
// SERVFAIL while new informers list again, nor while the API server is
// unreachable; server blocks with the same stanza watch once.
var sharedSources = struct {
	sync.Mutex
	m map[string]*sharedSource
	// pending: instances started by the start-up in progress. A reload
	// that fails after their start-up drops the new instance without
	// its shutdown callbacks; the running instance's OnRestartFailed
	// then stops them, or their controllers would run for ever.
	pending []*MCS
}{m: map[string]*sharedSource{}}

type sharedSource struct {
	index   *answers.Index
	ctl     *controller
	refs    int // started instances using it
	running bool
}

func init() {
	caddy.RegisterEventHook("mcs-shared-sources", func(ev caddy.EventName, _ any) error {
		if ev == caddy.InstanceStartupEvent { // start-up or reload succeeded
			sharedSources.Lock()
			sharedSources.pending = nil
			sharedSources.Unlock()
		}
		return nil
	})
}

// attach, at setup (before any server or the ready plugin reads p), makes
// p use the index and controller of its key, or registers p's own for it.
func (p *MCS) attach(key string) {
	if p.ctl == nil || key == "" {
		return
	}
	p.sourceKey = key
	sharedSources.Lock()
	defer sharedSources.Unlock()
	if s := sharedSources.m[key]; s != nil {
		p.index, p.ctl = s.index, s.ctl
		return
	}
	sharedSources.m[key] = &sharedSource{index: p.index, ctl: p.ctl}
}

// start starts p's controller unless it runs already (for another
// instance of the same key); it reports whether it started it, and why
// it could not.
func (p *MCS) start() (bool, error) {
	if p.ctl == nil || p.started {
		return false, nil
	}
	if p.sourceKey == "" {
		if err := p.ctl.start(); err != nil {
			return false, err
		}
		p.started = true
		return true, nil
	}
	sharedSources.Lock()
	defer sharedSources.Unlock()
	s := sharedSources.m[p.sourceKey]
	if s == nil || s.ctl != p.ctl {
		// Not registered since attach (its users all stopped): ours.
		s = &sharedSource{index: p.index, ctl: p.ctl}
		sharedSources.m[p.sourceKey] = s
	}
	started := !s.running
	if started {
		if err := p.ctl.start(); err != nil {
			if s.refs == 0 {
				delete(sharedSources.m, p.sourceKey)
			}
			return false, err
		}
		s.running = true
	}
	p.started = true
	s.refs++
	sharedSources.pending = append(sharedSources.pending, p)
	return started, nil
}

// stop stops the controller unless other started instances share it.
func (p *MCS) stop() {
	if p.ctl == nil || !p.started {
		return
	}
	p.started = false
	if p.sourceKey != "" {
		sharedSources.Lock()
		if s := sharedSources.m[p.sourceKey]; s != nil && s.ctl == p.ctl {
			if s.refs--; s.refs > 0 {
				sharedSources.Unlock()
				return
			}
			delete(sharedSources.m, p.sourceKey)
		}
		sharedSources.Unlock()
	}
	p.ctl.stop()
}

// stopPending stops the instances a failed reload started.
func stopPending() {
	sharedSources.Lock()
	started := sharedSources.pending
	sharedSources.pending = nil
	sharedSources.Unlock()
	for _, p := range started {
		p.stop()
	}
}

// awaitSync waits until the controller has synced, at most d: CoreDNS
// starts (or, on a reload, replaces the running instance) once every
// plugin's start-up has returned, so the previous instance keeps
// answering meanwhile (as the kubernetes plugin's startup_timeout). It
// returns the permanent error that stopped the sync, if one did before.
func (p *MCS) awaitSync(d time.Duration) error {
	if p.ctl == nil {
		return nil
	}
	return p.ctl.await(d)
}

// sourceKey says what a stanza's controller watches and how its answers
// are built: stanzas with equal keys share one. The client identity is
// taken from the loaded configuration with its files read (server, CA,
// credentials, impersonation): a rotated CA or token makes a new
// controller. "" (no sharing) when the files cannot be read.
func sourceKey(cfg *config, rc *rest.Config) string {
	c := rest.CopyConfig(rc)
	if err := rest.LoadTLSFiles(c); err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q %q %q %q %v %+v %+v %+v\n", c.Host, c.APIPath, c.ServerName, c.BearerToken,
		c.BearerTokenFile, c.Username, c.Password, c.Insecure, c.Impersonate, c.ExecProvider, c.AuthProvider)
	for _, b := range [][]byte{c.CAData, c.CertData, c.KeyData} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	ns := slices.Sorted(slices.Values(cfg.namespaces))
	managers := "*"
	if cfg.managers != nil {
		managers = strings.Join(slices.Sorted(slices.Values(cfg.managers)), ",")
	}
	sh := cfg.shaping
	shaping := fmt.Sprintf("%q %q %q %d %v %d", sh.ClusterID, sh.Region, cfg.regionProperty, sh.Locality, sh.Rotate, sh.MaxAnswers)
	return strings.Join([]string{hex.EncodeToString(h.Sum(nil)), strings.Join(ns, ","),
		strings.Join(cfg.forwardZones(), ","), strconv.Itoa(int(cfg.ttl)), managers, shaping}, "\x00")
}
