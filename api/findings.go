package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"orderd/store"
)

// FindingActor is a person's action on a finding (acknowledge, resolve,
// reopen); *store.Store runs it as a store command, so replicated mode
// carries it in the log.
type FindingActor interface {
	ActOnFinding(ctx context.Context, cmd store.FindingActionCmd) (store.Finding, error)
}

// findingActionBody is POST /v1/findings/{id}.
type findingActionBody struct {
	Action     *string `json:"action"`
	By         *string `json:"by"`
	Note       *string `json:"note"`
	Resolution *string `json:"resolution"`
}

// Bounds on the free text a person writes into the trail, in characters,
// as the gateway counts them (textProblem).
const (
	maxActorLen = 200
	maxNoteLen  = 4000
)

// handleFindingAction is POST /v1/findings/{id}: a person acknowledges,
// resolves (with a resolution) or reopens a finding. 200 with the finding
// and its trail; 400 naming a missing or unknown field; 404 for an unknown
// id; 409 for an action that does not apply to the finding as it stands.
func (s *server) handleFindingAction(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	// The dashboard's form is form-encoded. curl -d sends JSON under the
	// same Content-Type, so a body that opens like JSON is JSON. A form
	// refused for any reason is answered with a page a person can read,
	// which keeps what was typed; JSON callers get JSON.
	form := isForm(r) && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))
	fail := func(err error) {
		if form {
			s.failForm(w, r, body, err)
			return
		}
		s.fail(w, r, err)
	}
	id, perr := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if perr != nil || id <= 0 {
		fail(&badRequestError{field: "id", msg: fmt.Sprintf("finding id %q is not a positive integer", r.PathValue("id"))})
		return
	}
	if err != nil {
		fail(err)
		return
	}
	var b findingActionBody
	if form {
		err = decodeForm(body, &b)
	} else {
		err = decodeStrict(body, &b)
	}
	// A field of the wrong JSON type is a bad request naming it, like
	// every other fault of this body, not the gateway's 422.
	var wrongType fieldErrors
	if errors.As(err, &wrongType) && len(wrongType) > 0 {
		err = &badRequestError{field: wrongType[0].Field, msg: wrongType[0].Field + " " + wrongType[0].Message}
	}
	if err != nil {
		fail(err)
		return
	}
	cmd, err := findingAction(id, b)
	if err != nil {
		fail(err)
		return
	}
	f, err := s.deps.Store.ActOnFinding(r.Context(), cmd)
	if errors.Is(err, store.ErrFindingNotFound) {
		err = &findingNotFoundError{id: id}
	}
	if err != nil {
		fail(err)
		return
	}
	s.log.Info("finding action", "finding", f.ID, "kind", f.Kind, "action", cmd.Action, "by", cmd.By,
		"resolution", cmd.Resolution, "status", f.Status)
	if form {
		// The dashboard's form: back to the dashboard, which shows the
		// finding's new status (or lists it among the resolved ones).
		http.Redirect(w, r, "/#findings", http.StatusSeeOther)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// isForm reports whether r carries an HTML form (the dashboard's).
func isForm(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return ct == "application/x-www-form-urlencoded"
}

// decodeForm reads the dashboard's form into b: the same fields as the
// JSON body, each at most once, an empty one as absent.
func decodeForm(body []byte, b *findingActionBody) error {
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return &badRequestError{msg: "form: " + err.Error()}
	}
	fields := map[string]**string{"action": &b.Action, "by": &b.By, "note": &b.Note, "resolution": &b.Resolution}
	names := slices.Sorted(maps.Keys(q))
	for _, name := range names {
		dst, ok := fields[name]
		if !ok {
			return &badRequestError{field: name, msg: fmt.Sprintf("unknown field %q", name)}
		}
		if len(q[name]) > 1 {
			return &badRequestError{field: name, msg: fmt.Sprintf("field %q is given more than once", name)}
		}
		if v := q[name][0]; v != "" {
			*dst = &v
		}
	}
	return nil
}

// findingAction checks the body's words and returns the command.
func findingAction(id int64, b findingActionBody) (store.FindingActionCmd, error) {
	bad := func(field, format string, args ...any) error {
		return &badRequestError{field: field, msg: field + " " + fmt.Sprintf(format, args...)}
	}
	cmd := store.FindingActionCmd{ID: id}
	switch {
	case b.Action == nil || *b.Action == "":
		return cmd, bad("action", "is required: one of %s", strings.Join(store.FindingActions, ", "))
	case !slices.Contains(store.FindingActions, *b.Action):
		return cmd, bad("action", "%q is not one of %s", *b.Action, strings.Join(store.FindingActions, ", "))
	}
	cmd.Action = *b.Action
	if b.By == nil || strings.TrimSpace(*b.By) == "" {
		return cmd, bad("by", "is required: who takes the action")
	}
	cmd.By = strings.TrimSpace(*b.By)
	if problem := textProblem(cmd.By, maxActorLen); problem != "" {
		return cmd, bad("by", "%s", problem)
	}
	if b.Note != nil {
		cmd.Note = strings.TrimSpace(*b.Note)
	}
	if problem := textProblem(cmd.Note, maxNoteLen); problem != "" {
		return cmd, bad("note", "%s", problem)
	}
	switch {
	case cmd.Action != store.ActionResolve && b.Resolution != nil:
		return cmd, bad("resolution", "is given only with action resolve")
	case cmd.Action == store.ActionResolve && (b.Resolution == nil || *b.Resolution == ""):
		return cmd, bad("resolution", "is required with action resolve: one of %s", strings.Join(store.Resolutions, ", "))
	case cmd.Action == store.ActionResolve && !slices.Contains(store.Resolutions, *b.Resolution):
		return cmd, bad("resolution", "%q is not one of %s", *b.Resolution, strings.Join(store.Resolutions, ", "))
	case cmd.Action == store.ActionResolve:
		cmd.Resolution = *b.Resolution
	}
	if cmd.Action == store.ActionResolve && cmd.Note == "" {
		return cmd, bad("note", "is required with action resolve: why the finding is settled")
	}
	return cmd, nil
}
