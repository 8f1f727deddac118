// Package netcut is a TCP proxy a test can cut: the process behind it
// (an API server) keeps running, and only the clients that reach it
// through the proxy lose it, as when a network path fails. It can also
// delay what it forwards, as a far or overloaded member would.
package netcut

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections from Addr to a target.
type Proxy struct {
	target, addr string
	// delay is added to every chunk forwarded, each way (0: none).
	delay time.Duration
	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	p.serve(ln)
	return p, nil
}

// StartDelayed is Start with every chunk of data held for delay before it
// is forwarded, in each direction: a round trip through the proxy takes
// at least twice delay, while throughput is not limited (chunks in flight
// overlap).
func StartDelayed(target string, delay time.Duration) (*Proxy, error) {
	p, err := Start(target)
	if err == nil {
		p.mu.Lock()
		p.delay = delay
		p.mu.Unlock()
	}
	return p, err
}

// Addr is the proxy's address (host:port), the same after a Resume.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on && p.ln == nil {
		return false
	}
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, true) || !p.track(up, true) {
		c.Close()
		up.Close()
		return
	}
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _ = forward(up, c, delay); done <- struct{}{} }()
	go func() { _ = forward(c, up, delay); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	p.track(c, false)
	p.track(up, false)
}

// forward copies src to dst, each chunk no sooner than delay after it
// was read.
func forward(dst io.Writer, src io.Reader, delay time.Duration) error {
	if delay <= 0 {
		_, err := io.Copy(dst, src)
		return err
	}
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		time.Sleep(time.Until(ch.at))
		if _, err := dst.Write(ch.b); err != nil {
			for range q { // let the reader finish once src is closed
			}
			return err
		}
	}
	return nil
}

// Cut closes the listener and every connection: the target is
// unreachable through the proxy until Resume. Cutting a cut proxy does
// nothing.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// Resume listens again at the same address (retrying for up to 10 s while
// the port is still being released). Resuming a live proxy does nothing.
func (p *Proxy) Resume() error {
	p.mu.Lock()
	live := p.ln != nil
	p.mu.Unlock()
	if live {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proxy cannot listen at %s again: %w", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close cuts the proxy for good.
func (p *Proxy) Close() { p.Cut() }
