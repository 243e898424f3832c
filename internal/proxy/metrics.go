package proxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
)

// metrics are the proxy's counters: connections by protocol, bytes by
// direction (up = from the client), refusals by reason.
type metrics struct {
	conns   *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	refusal *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_proxy_connections_total", Help: "Connections accepted by the forward proxy, by protocol (http, socks5, socks4)."}, []string{"protocol"}),
		bytes:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_proxy_bytes_total", Help: "Bytes carried by the forward proxy, by direction (up = from the client)."}, []string{"direction"}),
		refusal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "airlock_proxy_refusals_total", Help: "Proxy requests and tunnels refused or cut, by reason."}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.conns, m.bytes, m.refusal} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "proxy metrics: %v", err)
			}
			// A second Server on one registry shares the counters.
			switch c {
			case m.conns:
				m.conns = are.ExistingCollector.(*prometheus.CounterVec)
			case m.bytes:
				m.bytes = are.ExistingCollector.(*prometheus.CounterVec)
			case m.refusal:
				m.refusal = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return m, nil
}

func (m *metrics) refused(r airlock.Reason) {
	if r == "" {
		r = "none"
	}
	m.refusal.WithLabelValues(string(r)).Inc()
}
