package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAPI_clusterOff: in single-node mode the cluster routes answer 404
// with an error saying that replicated mode is off, not that there is no
// such route.
func TestAPI_clusterOff(t *testing.T) {
	e := newEnv(t, setup{})
	for _, r := range []response{e.get("/v1/cluster"), e.post("/v1/cluster/snapshot", "")} {
		wantStatus(t, r, http.StatusNotFound)
		var body struct{ Error string }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("answer %s is not JSON: %v", r.body, err)
		}
		if !strings.Contains(body.Error, "replicated mode is off") || !strings.Contains(body.Error, "cluster.enabled") {
			t.Errorf("error %q does not say that replicated mode is off", body.Error)
		}
	}
}
