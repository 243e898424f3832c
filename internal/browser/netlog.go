package browser

import (
	"sync"
	"time"
)

// NetworkLogCapacity is how many requests network_log keeps (the last
// ones).
const NetworkLogCapacity = 500

// maxLoggedURL cuts URLs in the network log.
const maxLoggedURL = 2048

// NetworkEntry is one request that layer 1 saw, from any target of the
// browser, and what it decided.
type NetworkEntry struct {
	Time         time.Time `json:"time"`
	Method       string    `json:"method"`
	URL          string    `json:"url"`
	ResourceType string    `json:"resource_type,omitempty"`
	Tab          string    `json:"tab,omitempty"`
	Allowed      bool      `json:"allowed"`
	Reason       string    `json:"reason,omitempty"` // the refusal's reason
}

// NetworkLog is the result of network_log.
type NetworkLog struct {
	Entries []NetworkEntry `json:"entries"`
	Dropped int            `json:"dropped,omitempty"` // older entries no longer kept
}

// netRing keeps the last NetworkLogCapacity entries.
type netRing struct {
	mu      sync.Mutex
	entries []NetworkEntry
	next    int
	total   int
}

func (r *netRing) add(e NetworkEntry) {
	e.URL = cut(e.URL, maxLoggedURL)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if len(r.entries) < NetworkLogCapacity {
		r.entries = append(r.entries, e)
		return
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % NetworkLogCapacity
}

// count is the number of entries added so far.
func (r *netRing) count() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// refusedSince returns up to limit refused entries added after the first n
// (those the ring still holds), oldest first.
func (r *netRing) refusedSince(n, limit int) []NetworkEntry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []NetworkEntry
	added := r.total - n
	held := len(r.entries)
	for i := max(held-added, 0); i < held && len(out) < limit; i++ {
		e := r.entries[(r.next+i)%held]
		if !e.Allowed {
			out = append(out, e)
		}
	}
	return out
}

func (r *netRing) snapshot() NetworkLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]NetworkEntry, 0, len(r.entries))
	out = append(out, r.entries[r.next:]...)
	out = append(out, r.entries[:r.next]...)
	return NetworkLog{Entries: out, Dropped: r.total - len(out)}
}

// NetworkLog returns the requests seen so far (the last
// NetworkLogCapacity), oldest first. It does not touch the browser.
func (s *Session) NetworkLog() NetworkLog { return s.netlog.snapshot() }
