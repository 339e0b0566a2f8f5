package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// mergePatchType is the media type of a JSON merge patch (RFC 7396), the
// only PATCH body the handler takes.
const mergePatchType = "application/merge-patch+json"

// patchError is a merge patch that cannot apply to the record: the
// client's mistake, answered 400.
type patchError struct{ detail string }

func (e *patchError) Error() string { return e.detail }

// patch applies a JSON merge patch to record id, guarded like put: at the
// version If-Match names, with the repository's guarded write, or with
// If-Match: * (or no If-Match when not strict) to whatever version is
// current, atomically. It never creates a record.
func (h *Handler[T]) patch(w http.ResponseWriter, r *http.Request, id any) {
	im, inm, ok := h.conditions(w, r)
	if !ok {
		return
	}
	patch, raw, ok := h.decodePatch(w, r, id)
	if !ok {
		return
	}
	key, ok := h.idempotencyKey(w, r, id, raw)
	if !ok {
		return
	}
	if !im.present && h.cfg.strict {
		problem(w, http.StatusPreconditionRequired, "a PATCH must carry If-Match with the ETag of the version it changes (or If-Match: * for any version)")
		return
	}
	ctx := r.Context()
	cur, err := h.repo.Get(ctx, id)
	exists := err == nil
	if err != nil && !errors.Is(err, locking.ErrNotFound) {
		h.fail(w, r, err)
		return
	}
	var version int64
	if exists {
		_, version, _ = h.repo.Adapter().Identity(cur)
	}
	if why := failedCondition(im, inm, exists, version); why != "" {
		if h.replayed(w, r, key, id) {
			return
		}
		if exists && im.present && !im.any {
			// The patched record against the current one: what differs.
			patched := *cur
			if h.applyPatch(&patched, patch, id) == nil {
				h.staleAt(w, version, h.repo.Adapter().Differing(&patched, cur), "%s", why)
				return
			}
		}
		h.preconditionFailedAt(w, exists, version, "%s", why)
		return
	}
	switch {
	case !exists:
		if h.replayed(w, r, key, id) {
			return
		}
		problem(w, http.StatusNotFound, "no such record: a PATCH changes a record, it does not create one")
	case im.present && !im.any:
		// The named version is current: the guarded write at that version.
		if err := h.applyPatch(cur, patch, id); err != nil {
			h.patchFailed(w, r, err)
			return
		}
		if err := h.repo.Update(ctx, cur, keyOpts[repository.UpdateOption](key)...); err != nil {
			h.writeFailed(w, r, id, err)
			return
		}
		h.send(w, http.StatusOK, cur)
	default:
		// Any existing version: patch whatever is current, atomically,
		// merging again into every version read and re-checking
		// If-None-Match on it.
		e, err := h.repo.Mutate(ctx, id, func(cur *T) error {
			if _, v, _ := h.repo.Adapter().Identity(cur); failedCondition(im, inm, true, v) != "" {
				return errPrecondition
			}
			return h.applyPatch(cur, patch, id)
		}, keyOpts[repository.MutateOption](key)...)
		switch {
		case errors.Is(err, locking.ErrNotFound) && !im.present:
			problem(w, http.StatusNotFound, "no such record: it was deleted")
		case errors.Is(err, errPrecondition) || errors.Is(err, locking.ErrNotFound):
			h.preconditionFailed(w, r, id, "the record changed and no longer meets If-None-Match, or was deleted")
		case err != nil:
			h.patchFailed(w, r, err)
		default:
			h.send(w, http.StatusOK, e)
		}
	}
}

// patchFailed answers a patch that did not apply: 400 for a patch the
// record cannot take, otherwise as fail does.
func (h *Handler[T]) patchFailed(w http.ResponseWriter, r *http.Request, err error) {
	var pe *patchError
	if errors.As(err, &pe) {
		problem(w, http.StatusBadRequest, "%s", pe.detail)
		return
	}
	h.fail(w, r, err)
}

// decodePatch reads a JSON merge patch for record id, answering 415 (with
// Accept-Patch), 413 or 400. The patch must be one JSON object whose
// members are fields of T with values of their types, and must not name
// another id. It returns the body's bytes too.
func (h *Handler[T]) decodePatch(w http.ResponseWriter, r *http.Request, id any) (map[string]any, []byte, bool) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != mergePatchType {
		w.Header().Set("Accept-Patch", mergePatchType)
		problem(w, http.StatusUnsupportedMediaType, "a PATCH body must be a JSON merge patch (RFC 7396), Content-Type: %s", mergePatchType)
		return nil, nil, false
	}
	raw, ok := h.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep every digit of a large integer
	var v any
	err = dec.Decode(&v)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err == io.EOF {
		err = errors.New("the body is empty")
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "malformed JSON merge patch: %v", err)
		return nil, nil, false
	}
	patch, isObject := v.(map[string]any)
	if !isObject {
		// RFC 7396 lets such a patch replace the whole document; a record
		// is an object, so it would only ever blank it.
		problem(w, http.StatusBadRequest, "a merge patch must be a JSON object naming the fields to change (a patch that is not an object would replace the whole record)")
		return nil, nil, false
	}
	// The patch alone, decoded strictly, catches unknown fields, values of
	// the wrong type and another id before any I/O (null decodes as "no
	// change", so members the patch removes pass).
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	var e T
	if err := strict.Decode(&e); err != nil {
		problem(w, http.StatusBadRequest, "the merge patch does not fit the record: %v", err)
		return nil, nil, false
	}
	if bid, _, zero := h.repo.Adapter().Identity(&e); !zero && fmt.Sprint(bid) != fmt.Sprint(id) {
		problem(w, http.StatusBadRequest, "the patch's id %v is not the id in the URL (%v): a PATCH cannot move a record", bid, id)
		return nil, nil, false
	}
	return patch, raw, true
}

// applyPatch changes cur by the merge patch: it merges the patch into cur's
// JSON (what GET returns), decodes the result into a new T and copies its
// writable fields into cur, so the patch can change neither the key, the
// version nor the timestamps. Fields the JSON leaves out (json:"-") keep
// cur's values. An error the client caused is a *patchError.
func (h *Handler[T]) applyPatch(cur *T, patch map[string]any, id any) error {
	b, err := json.Marshal(cur)
	if err != nil {
		return fmt.Errorf("rest: encoding the record to patch: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("rest: decoding the record to patch: %w", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return fmt.Errorf("rest: the JSON of a %s record is not an object: it cannot be patched", h.repo.Table())
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return fmt.Errorf("rest: encoding the patched record: %w", err)
	}
	dec = json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	src := new(T)
	if err := dec.Decode(src); err != nil {
		return &patchError{fmt.Sprintf("the patched record is not valid: %v", err)}
	}
	if bid, _, zero := h.repo.Adapter().Identity(src); !zero && fmt.Sprint(bid) != fmt.Sprint(id) {
		return &patchError{fmt.Sprintf("the patch's id %v is not the id in the URL (%v): a PATCH cannot move a record", bid, id)}
	}
	h.keepHidden(src, cur)
	if names := h.repo.Adapter().ChangedUnversioned(cur, src); len(names) > 0 {
		return &patchError{fmt.Sprintf("the patch changes %s, which changes outside the record's version (a counter): a PATCH does not write it", strings.Join(h.jsonNames(names), ", "))}
	}
	return h.repo.Adapter().CopyWritable(cur, src)
}

// mergePatch applies patch to target as RFC 7396's MergePatch does and
// returns the result: an object patch replaces the members it names,
// removes those it sets to null and merges nested objects; any other patch
// replaces target. It may change target, never patch.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for name, v := range p {
		if v == nil {
			delete(t, name)
		} else {
			t[name] = mergePatch(t[name], v)
		}
	}
	return t
}

// jsonHidden returns the index paths of t's settable fields that its JSON
// leaves out (tagged json:"-"), in t and in the structs it holds by value
// (embedded or gorm:"embedded") that decode field by field, so that a
// PATCH keeps their values instead of writing the zero value a decoded
// body has there.
func jsonHidden(t reflect.Type) [][]int {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	var out [][]int
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue // not settable, and no column
			}
			path := append(append([]int(nil), prefix...), i)
			switch {
			case f.Tag.Get("json") == "-":
				out = append(out, path)
			case f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(unmarshaler):
				walk(f.Type, path)
			}
		}
	}
	if t.Kind() == reflect.Struct {
		walk(t, nil)
	}
	return out
}
