package egress

import (
	"context"
	"net"
	"time"
)

// DefaultInfraDialTimeout bounds DialInfrastructure when ctx has no
// deadline.
const DefaultInfraDialTimeout = 5 * time.Second

// DialInfrastructure dials an address the operator configured for
// Airlock's own infrastructure, such as the Redis a fleet of replicas
// shares: never a workload's target. The floor does not apply (such
// services live on loopback and private addresses) and nothing is
// audited; it exists so that every socket the process opens is opened in
// this package. A name in addr is resolved by the system resolver.
func DialInfrastructure(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: DefaultInfraDialTimeout, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, network, addr)
}
