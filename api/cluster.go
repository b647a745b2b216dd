package api

import (
	"context"
	"errors"
	"net/http"
)

// Cluster is replicated mode as the admin API shows it; nil in
// single-node mode, where /v1/cluster answers 404.
type Cluster interface {
	// Status is GET /v1/cluster's body.
	Status(ctx context.Context) any
	// Snapshot writes a snapshot now (leader only) and describes it.
	Snapshot(ctx context.Context) (any, error)
}

// handleCluster is GET /v1/cluster: this instance's view of the cluster.
func (s *server) handleCluster(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.deps.Cluster.Status(r.Context()))
}

// handleClusterSnapshot is POST /v1/cluster/snapshot: a snapshot now, on
// the leader (409 elsewhere, naming the leader in the error).
func (s *server) handleClusterSnapshot(w http.ResponseWriter, r *http.Request) {
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
