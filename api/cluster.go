package api

import (
	"context"
	"errors"
	"net/http"
)

// Cluster is replicated mode as the admin API shows it; nil in
// single-node mode, where /v1/cluster and /v1/cluster/snapshot answer 404
// saying that replicated mode is off.
type Cluster interface {
	// Status is GET /v1/cluster's body.
	Status(ctx context.Context) any
	// Snapshot writes a snapshot now (leader only) and describes it.
	Snapshot(ctx context.Context) (any, error)
}

// handleCluster is GET /v1/cluster: this instance's view of the cluster.
func (s *server) handleCluster(w http.ResponseWriter, r *http.Request) {
	if s.deps.Cluster == nil {
		s.fail(w, r, errClusterOff)
		return
	}
	writeJSON(w, http.StatusOK, s.deps.Cluster.Status(r.Context()))
}

// handleClusterSnapshot is POST /v1/cluster/snapshot: a snapshot now, on
// the leader (409 elsewhere, naming the leader in the error).
func (s *server) handleClusterSnapshot(w http.ResponseWriter, r *http.Request) {
	if s.deps.Cluster == nil {
		s.fail(w, r, errClusterOff)
		return
	}
	si, err := s.deps.Cluster.Snapshot(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, si)
}

// ErrNotLeader is what Cluster.Snapshot wraps on an instance that does not
// lead: 409.
var ErrNotLeader = errors.New("this instance does not hold the lease; ask the leader (GET /v1/cluster names it)")

// errClusterOff answers the cluster routes in single-node mode: 404, for
// there is no cluster to show, with a message that says why.
var errClusterOff = errors.New("replicated mode is off on this instance (cluster.enabled: false): it runs as a single node, with no log, lease or snapshots to show")
