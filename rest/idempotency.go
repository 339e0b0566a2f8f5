package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/gormlock/gormlock/repository"
)

// maxIdempotencyKey is the longest Idempotency-Key, leaving room in an
// operation key for the handler's prefix.
const maxIdempotencyKey = 200

// idempotencyKey returns the write option of the request's Idempotency-Key
// (none without the header), bound to the request: its method, the
// record's id (nil for a POST, whose id may be the server's) and body. A
// malformed key is answered 400.
func (h *Handler[T]) idempotencyKey(w http.ResponseWriter, r *http.Request, id any, body []byte) ([]repository.WriteOption, bool) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		return nil, true
	}
	v := strings.TrimSpace(vals[0])
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1] // a structured-field string
	}
	ok := len(vals) == 1 && v != "" && len(v) <= maxIdempotencyKey
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] >= 0x20 && v[i] <= 0x7e && v[i] != '"' && v[i] != '\\'
	}
	if !ok {
		problem(w, http.StatusBadRequest, "Idempotency-Key must be one value of 1 to %d printable ASCII characters", maxIdempotencyKey)
		return nil, false
	}
	scope := ""
	if h.cfg.scope != nil {
		scope = h.cfg.scope(r)
	}
	name := sha256.Sum256([]byte(h.repo.Table() + "\x00" + scope + "\x00" + v))
	fp := sha256.New()
	fmt.Fprintf(fp, "%s\n%v\n", r.Method, id)
	fp.Write(body)
	key := repository.OpKey("http " + hex.EncodeToString(name[:])).WithFingerprint(hex.EncodeToString(fp.Sum(nil)))
	return []repository.WriteOption{key}, true
}

// keyOpts passes the request's operation key, if any, to a call whose
// options are of family O (UpdateOption, DeleteOption, MutateOption).
func keyOpts[O any](key []repository.WriteOption) []O {
	out := make([]O, 0, len(key))
	for _, k := range key {
		if o, ok := any(k).(O); ok {
			out = append(out, o)
		}
	}
	return out
}

// replayed answers a request whose precondition no longer holds because it
// was applied already: a repeat of a keyed PUT, PATCH or DELETE. It reports
// whether it answered.
func (h *Handler[T]) replayed(w http.ResponseWriter, r *http.Request, key []repository.WriteOption, id any) bool {
	if len(key) == 0 {
		return false
	}
	k := key[0].(repository.OperationKey)
	op, err := repository.LookupOperation(r.Context(), h.repo.DB(r.Context()), k.Key())
	if err != nil || op == nil || op.Table != h.repo.Table() {
		return false
	}
	if op.Fingerprint != k.Fingerprint() {
		problem(w, http.StatusUnprocessableEntity, "the Idempotency-Key was used with another request")
		return true
	}
	switch {
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case op.Kind == "create":
		cur, err := h.repo.Get(r.Context(), id)
		if err != nil {
			h.fail(w, r, err)
			return true
		}
		w.Header().Set("Location", requestPath(r))
		h.send(w, http.StatusCreated, cur)
	default:
		cur, err := h.repo.Get(r.Context(), id)
		if err != nil {
			h.fail(w, r, err)
			return true
		}
		h.send(w, http.StatusOK, cur)
	}
	return true
}
