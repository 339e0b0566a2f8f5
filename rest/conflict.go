package rest

import (
	"context"
	"errors"
	"net/http"

	"github.com/gormlock/gormlock/locking"
)

// The details of a 409 for a write the database refused on a unique index.
// Neither echoes the database's message, which names constraints and SQL.
const (
	detailIDTaken    = "a record with this id already exists"
	detailValueTaken = "a unique value of the record is already taken"
	detailTaken      = "the record's id or another of its unique values is already taken"
)

// createConflict answers a create the database refused on a unique index
// (an error matching locking.ErrAlreadyExists): 409 saying whether the id is
// taken or another unique value is. id is the key the client chose, nil when
// the database assigns it — then the id cannot be what collided.
func (h *Handler[T]) createConflict(w http.ResponseWriter, r *http.Request, id any) {
	detail := detailValueTaken
	if id != nil {
		switch exists, known := h.exists(r.Context(), id); {
		case !known:
			detail = detailTaken
		case exists:
			detail = detailIDTaken
		}
	}
	problem(w, http.StatusConflict, "%s", detail)
}

// exists reports whether record id exists; known is false when the read
// failed, and then exists says nothing.
func (h *Handler[T]) exists(ctx context.Context, id any) (exists, known bool) {
	_, err := h.repo.Get(ctx, id)
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, locking.ErrNotFound):
		return false, true
	default:
		return false, false
	}
}
