// Package rest exposes a [repository.Repository] as a JSON resource over HTTP,
// with the record's version as its ETag, so HTTP clients get the same
// protection against lost updates as Go callers: a write must name the
// version it read in If-Match, and gets 412 when the record moved on. The
// guide is docs/http.md.
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"context"
//		"log"
//		"net/http"
//
//		"github.com/gormlock/gormlock/migrations"
//		"github.com/gormlock/gormlock/models"
//		"github.com/gormlock/gormlock/opendb/sqlite"
//		"github.com/gormlock/gormlock/repository"
//		"github.com/gormlock/gormlock/rest"
//	)
//
//	type Note struct {
//		models.Model
//		Text string `gorm:"not null" json:"text"`
//	}
//
//	func main() {
//		db, err := sqlite.Open("notes.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		if err := migrations.Up(context.Background(), db); err != nil { // for Idempotency-Key
//			log.Fatal(err)
//		}
//		if err := db.AutoMigrate(&Note{}); err != nil {
//			log.Fatal(err)
//		}
//		notes, err := repository.New[Note](db)
//		if err != nil {
//			log.Fatal(err)
//		}
//		h, err := rest.New(notes)
//		if err != nil {
//			log.Fatal(err)
//		}
//		mux := http.NewServeMux()
//		rest.Mount(mux, "/notes", h)
//		log.Fatal(http.ListenAndServe("localhost:8080", mux))
//	}
//
// [Mount](mux, "/documents", h) serves the collection at both "/documents"
// and "/documents/"; the
// handler itself treats an empty path and "/" alike, so
// mux.Handle("/documents/", http.StripPrefix("/documents", h)) works too,
// except that ServeMux then answers "/documents" (no slash) with a redirect
// that creates nothing.
//
// Routes, relative to where the handler is mounted:
//
//	GET     /       list, paged with ?limit=&offset=
//	POST    /       create (201, Location, ETag); 409 when the id or another unique value is taken
//	GET     /{id}   read (ETag, Accept-Patch); 304 when If-None-Match names the version
//	PUT     /{id}   replace, guarded by If-Match; If-None-Match: * creates only if absent
//	PATCH   /{id}   JSON merge patch (RFC 7396), guarded by If-Match; never creates
//	DELETE  /{id}   delete, guarded by If-Match
//	OPTIONS /, /{id}  204 with Allow (and Accept-Patch on a record)
//
// Conditional requests follow RFC 9110. Every response carrying a record
// carries its strong ETag, "<version>". A PUT, PATCH or DELETE whose
// If-Match does not name the current version is answered 412 Precondition
// Failed with the current ETag (for a PUT or PATCH, the problem's "fields"
// member names the fields that differ from the current record, see
// Problem); when it does, the write is the repository's
// guarded write at that version, so a race between the check and the write
// is still caught (412), never lost. In strict mode (the default) a PUT,
// PATCH or DELETE without If-Match is answered 428 Precondition Required.
// If-Match: * means "any existing version"; a list of ETags is honoured;
// weak ETags never match If-Match.
//
// A PATCH body is a JSON merge patch (Content-Type:
// application/merge-patch+json): it is merged into the record's JSON as GET
// returns it — members it names are replaced, members it sets to null are
// removed (the field becomes its zero value), objects are merged member by
// member, everything else is kept — and the result is written like a PUT's
// body: only the writable fields, never the id, version or timestamps.
// Fields the JSON leaves out (json:"-") keep their values, in a PATCH and
// in a PUT alike (a client cannot see them, so cannot send them), and a
// 412's fields never name them. With If-Match: * the patch is applied to whatever
// version is current, atomically: a concurrent change makes it re-read and
// merge again. A patch must be a JSON object. A PATCH never creates: a
// missing record is 412 when If-Match names a version (as for PUT), 404
// otherwise.
//
// Errors are problem details (RFC 9457, application/problem+json): 400 for
// a malformed id, body, header or query, 404, 405, 409 when the record's id
// or another of its unique values is taken (the detail says which, without
// the database's message), 412, 413 over the body limit, 415 for a body
// that is not JSON (or, for PATCH, not a merge patch: the answer carries
// Accept-Patch), 423 Locked for a record leased by someone else (see
// below), 428, and 500 with no detail for anything unexpected. A body can
// change neither the id nor the version of the record it targets: the id
// comes from the URL (a body naming another id is a 400), the version from
// If-Match; nor its timestamps; nor a field tagged gormlock:"unversioned"
// (see repository.UnversionedTag): a PUT's value for one is not written,
// and a PATCH that changes one is a 400 naming it.
//
// A leased record (repository.WithLeases) is answered 423 Locked with a
// Retry-After until the lease ends: it is not a conflict the client can
// resolve by re-reading (409) nor a failed precondition (412) — the record
// is checked out, and the same request will succeed once it is returned.
//
// POST, PUT, PATCH and DELETE take an Idempotency-Key header (the IETF
// httpapi draft's, as Stripe's API has it): the write is made with that
// operation key (repository.OpKey), so a client that retries a request —
// after a timeout, a dropped connection, a 500 — gets the first request's
// outcome instead of applying it twice: a repeat of an applied PUT or PATCH
// is 200 with the record as it is now, of a POST 201 with its Location, of
// a DELETE 204, even though If-Match no longer names the current version. The key is
// bound to the request (method, path and body): the same key with another
// request is 422. Keys are 1 to 200 printable ASCII characters, quoted (a
// structured-field string) or not; WithIdempotencyScope keeps one client's keys
// apart from another's.
package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Handler serves one repository as a JSON resource. Build it with New.
type Handler[T any] struct {
	repo *repository.Repository[T]
	cfg  config
	// hidden are the index paths of T's fields that its JSON leaves out,
	// which a PUT and a PATCH keep as they are (see keepHidden).
	hidden [][]int
}

type config struct {
	strict       bool
	maxBody      int64
	defaultLimit int
	maxLimit     int
	logError     func(r *http.Request, err error)
	scope        func(r *http.Request) string
}

// Option configures a Handler in New.
type Option func(*config) error

// WithStrict sets whether PUT, PATCH and DELETE require If-Match (428 without
// it). On by default. Off, a PUT, PATCH or DELETE without If-Match writes
// whatever version is current (still atomically: a concurrent change makes
// it re-read).
func WithStrict(on bool) Option {
	return func(c *config) error { c.strict = on; return nil }
}

// WithMaxBodyBytes limits request bodies (413 beyond it). The default is 1 MiB.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return locking.Invalid("rest: WithMaxBodyBytes must be positive, got %d", n)
		}
		c.maxBody = n
		return nil
	}
}

// WithPageLimits sets the list page size when the request gives none (def) and
// the largest a request may ask for (max). The defaults are 50 and 1000.
func WithPageLimits(def, max int) Option {
	return func(c *config) error {
		if def <= 0 || max < def {
			return locking.Invalid("rest: WithPageLimits needs 0 < default (%d) <= max (%d)", def, max)
		}
		c.defaultLimit, c.maxLimit = def, max
		return nil
	}
}

// WithErrorLog sets a function called with every error answered 500, for the
// server's log; the client gets no detail.
func WithErrorLog(f func(r *http.Request, err error)) Option {
	return func(c *config) error { c.logError = f; return nil }
}

// WithIdempotencyScope sets the function that names whose Idempotency-Key a
// request carries — the authenticated user or API client — so that two
// clients choosing the same key never see each other's outcomes. Without
// it every client shares one space of keys (still bound to the request:
// the same key with another request is a 422).
func WithIdempotencyScope(f func(r *http.Request) string) Option {
	return func(c *config) error { c.scope = f; return nil }
}

// New returns the handler of repo.
func New[T any](repo *repository.Repository[T], opts ...Option) (*Handler[T], error) {
	if repo == nil {
		return nil, locking.Invalid("rest: repository is nil")
	}
	c := config{strict: true, maxBody: 1 << 20, defaultLimit: 50, maxLimit: 1000}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return nil, err
		}
	}
	return &Handler[T]{repo: repo, cfg: c, hidden: jsonHidden(reflect.TypeFor[T]())}, nil
}

// The methods of the collection and of a record, for Allow.
const (
	collectionMethods = "GET, HEAD, POST, OPTIONS"
	recordMethods     = "GET, HEAD, PUT, PATCH, DELETE, OPTIONS"
)

// ServeHTTP implements http.Handler. The path is relative to where the
// handler is mounted: "" and "/" are the collection, "/{id}" a record.
func (h *Handler[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	if path == "" {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.list(w, r)
		case http.MethodPost:
			h.create(w, r)
		case http.MethodOptions:
			w.Header().Set("Allow", collectionMethods)
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", collectionMethods)
			problem(w, http.StatusMethodNotAllowed, "method %s is not allowed on the collection", r.Method)
		}
		return
	}
	if strings.Contains(path, "/") {
		problem(w, http.StatusNotFound, "no such resource")
		return
	}
	seg, err := url.PathUnescape(path)
	if err != nil {
		problem(w, http.StatusBadRequest, "malformed id in the path")
		return
	}
	var handle func(http.ResponseWriter, *http.Request, any)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		handle = h.get
	case http.MethodPut:
		handle = h.put
	case http.MethodPatch:
		handle = h.patch
	case http.MethodDelete:
		handle = h.delete
	case http.MethodOptions:
		handle = h.options
	default:
		w.Header().Set("Allow", recordMethods)
		problem(w, http.StatusMethodNotAllowed, "method %s is not allowed on a record", r.Method)
		return
	}
	id, err := h.repo.Adapter().ParseID(seg)
	if err != nil {
		problem(w, http.StatusBadRequest, "malformed id: %v", err)
		return
	}
	handle(w, r, id)
}

// options answers OPTIONS on a record: its methods, and the patch format.
func (h *Handler[T]) options(w http.ResponseWriter, _ *http.Request, _ any) {
	w.Header().Set("Allow", recordMethods)
	w.Header().Set("Accept-Patch", mergePatchType)
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler[T]) get(w http.ResponseWriter, r *http.Request, id any) {
	inm, err := parseCondition(r.Header.Values("If-None-Match"))
	if err != nil {
		problem(w, http.StatusBadRequest, "If-None-Match: %v", err)
		return
	}
	e, err := h.repo.Get(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Accept-Patch", mergePatchType)
	_, version, _ := h.repo.Adapter().Identity(e)
	if inm.any || inm.matchWeak(version) {
		w.Header().Set("ETag", ETag(version))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.send(w, http.StatusOK, e)
}

// page is the list response.
type page[T any] struct {
	Items  []T  `json:"items"`
	Offset int  `json:"offset"`
	Limit  int  `json:"limit"`
	Next   *int `json:"next_offset"` // null on the last page
}

func (h *Handler[T]) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset := h.cfg.defaultLimit, 0
	for name, dst := range map[string]*int{"limit": &limit, "offset": &offset} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			problem(w, http.StatusBadRequest, "%s must be a non-negative integer, got %q", name, v)
			return
		}
		*dst = n
	}
	if limit < 1 || limit > h.cfg.maxLimit {
		problem(w, http.StatusBadRequest, "limit must be between 1 and %d, got %d", h.cfg.maxLimit, limit)
		return
	}
	// One more than asked, to know whether there is a next page.
	items, err := h.repo.Find(r.Context(), repository.Limit(limit+1), repository.Offset(offset))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := page[T]{Items: items, Offset: offset, Limit: limit}
	if len(items) > limit {
		p.Items = items[:limit]
		next := offset + limit
		p.Next = &next
	}
	writeJSON(w, http.StatusOK, "application/json", p)
}

func (h *Handler[T]) create(w http.ResponseWriter, r *http.Request) {
	body, raw, ok := h.decode(w, r)
	if !ok {
		return
	}
	key, ok := h.idempotencyKey(w, r, nil, raw)
	if !ok {
		return
	}
	bid, _, zero := h.repo.Adapter().Identity(body)
	if h.repo.Adapter().KeyAssignedByDatabase() && !zero {
		problem(w, http.StatusBadRequest, "ids of this collection are assigned by the server: leave the id out")
		return
	}
	if s := fmt.Sprint(bid); !zero && (s == "." || s == "..") {
		problem(w, http.StatusBadRequest, "%q cannot be an id: it would not be reachable in a URL", s)
		return
	}
	if zero {
		bid = nil
	}
	e, err := h.newRecord(body, bid)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.repo.Create(r.Context(), e, key...); err != nil {
		if errors.Is(err, locking.ErrAlreadyExists) {
			h.createConflict(w, r, bid)
			return
		}
		h.fail(w, r, err)
		return
	}
	id, _, _ := h.repo.Adapter().Identity(e)
	loc := strings.TrimSuffix(requestPath(r), "/") + "/" + url.PathEscape(fmt.Sprint(id))
	w.Header().Set("Location", loc)
	h.send(w, http.StatusCreated, e)
}

// newRecord builds the record a create writes from a request body: only
// the body's writable fields (not its version or timestamps), and the key
// id unless it is nil (a key the database assigns).
func (h *Handler[T]) newRecord(body *T, id any) (*T, error) {
	e := new(T)
	if err := h.repo.Adapter().CopyWritable(e, body); err != nil {
		return nil, err
	}
	if id != nil {
		if err := h.repo.Adapter().SetIdentity(e, id, 0); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// errPrecondition ends a Mutate whose precondition failed on the version
// it read.
var errPrecondition = errors.New("precondition failed")

// failedCondition evaluates If-Match and then If-None-Match (RFC 9110,
// section 13.2.2) for a state-changing request against the record's current
// version (exists is false when there is no record), and says which failed;
// "" means both pass.
func failedCondition(im, inm condition, exists bool, version int64) string {
	switch {
	case im.present && !exists:
		return "If-Match names a version of a record that does not exist"
	case im.present && !im.any && !im.matchStrong(version):
		return "If-Match does not name the current version " + ETag(version)
	case inm.present && exists && inm.any:
		return "the record exists, and If-None-Match: * asked to create it only if absent"
	case inm.present && exists && inm.matchWeak(version):
		return "If-None-Match names the current version " + ETag(version)
	}
	return ""
}

func (h *Handler[T]) put(w http.ResponseWriter, r *http.Request, id any) {
	im, inm, ok := h.conditions(w, r)
	if !ok {
		return
	}
	body, raw, ok := h.decode(w, r)
	if !ok {
		return
	}
	key, ok := h.idempotencyKey(w, r, id, raw)
	if !ok {
		return
	}
	if bid, _, zero := h.repo.Adapter().Identity(body); !zero && fmt.Sprint(bid) != fmt.Sprint(id) {
		problem(w, http.StatusBadRequest, "the body's id %v is not the id in the URL (%v): a PUT cannot move a record", bid, id)
		return
	}
	if !im.present && !inm.any && h.cfg.strict {
		problem(w, http.StatusPreconditionRequired, "a PUT must carry If-Match with the ETag of the version it replaces (or If-None-Match: * to create)")
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
			// The body's record against the current one: what differs.
			h.keepHidden(body, cur)
			h.staleAt(w, version, h.repo.Adapter().Differing(body, cur), "%s", why)
			return
		}
		h.preconditionFailedAt(w, exists, version, "%s", why)
		return
	}
	switch {
	case !exists && inm.any:
		// Create only if absent.
		if h.repo.Adapter().KeyAssignedByDatabase() {
			problem(w, http.StatusBadRequest, "ids of this collection are assigned by the server: create with POST")
			return
		}
		e, err := h.newRecord(body, id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		err = h.repo.Create(ctx, e, key...)
		if errors.Is(err, locking.ErrAlreadyExists) {
			switch exists, known := h.exists(ctx, id); {
			case exists:
				h.preconditionFailed(w, r, id, "the record was created meanwhile, and If-None-Match: * asked to create it only if absent")
			case known:
				// Absent still: the insert hit another unique index.
				problem(w, http.StatusConflict, "%s", detailValueTaken)
			default:
				problem(w, http.StatusConflict, "%s", detailTaken)
			}
			return
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		w.Header().Set("Location", requestPath(r))
		h.send(w, http.StatusCreated, e)
	case !exists:
		if h.replayed(w, r, key, id) {
			return
		}
		problem(w, http.StatusNotFound, "no such record")
	case im.present && !im.any:
		// The named version is current: the guarded write at that version.
		h.keepHidden(body, cur)
		if err := h.repo.Adapter().CopyWritable(cur, body); err != nil {
			h.fail(w, r, err)
			return
		}
		if err := h.repo.Update(ctx, cur, keyOpts[repository.UpdateOption](key)...); err != nil {
			h.writeFailed(w, r, id, err)
			return
		}
		h.send(w, http.StatusOK, cur)
	default:
		// Any existing version: replace whatever is current, atomically,
		// re-checking If-None-Match on every version read.
		e, err := h.repo.Mutate(ctx, id, func(cur *T) error {
			if _, v, _ := h.repo.Adapter().Identity(cur); failedCondition(im, inm, true, v) != "" {
				return errPrecondition
			}
			h.keepHidden(body, cur)
			return h.repo.Adapter().CopyWritable(cur, body)
		}, keyOpts[repository.MutateOption](key)...)
		switch {
		case errors.Is(err, errPrecondition) || errors.Is(err, locking.ErrNotFound):
			h.preconditionFailed(w, r, id, "the record changed and no longer meets If-None-Match, or was deleted")
		case err != nil:
			h.fail(w, r, err)
		default:
			h.send(w, http.StatusOK, e)
		}
	}
}

func (h *Handler[T]) delete(w http.ResponseWriter, r *http.Request, id any) {
	im, inm, ok := h.conditions(w, r)
	if !ok {
		return
	}
	if !im.present && h.cfg.strict {
		problem(w, http.StatusPreconditionRequired, "a DELETE must carry If-Match with the ETag of the version it deletes")
		return
	}
	key, ok := h.idempotencyKey(w, r, id, nil)
	if !ok {
		return
	}
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
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
			h.preconditionFailedAt(w, exists, version, "%s", why)
			return
		}
		if !exists {
			if h.replayed(w, r, key, id) {
				return
			}
			problem(w, http.StatusNotFound, "no such record")
			return
		}
		err = h.repo.Delete(ctx, cur, keyOpts[repository.DeleteOption](key)...)
		// "Any version" (If-Match: *, or no If-Match when not strict):
		// a concurrent change is no failed precondition, so re-read.
		if errors.Is(err, locking.ErrStaleData) && (im.any || !im.present) && attempt < 10 {
			continue
		}
		if err != nil {
			h.writeFailed(w, r, id, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
}

// conditions parses If-Match and If-None-Match.
func (h *Handler[T]) conditions(w http.ResponseWriter, r *http.Request) (im, inm condition, ok bool) {
	im, err := parseCondition(r.Header.Values("If-Match"))
	if err != nil {
		problem(w, http.StatusBadRequest, "If-Match: %v", err)
		return im, inm, false
	}
	inm, err = parseCondition(r.Header.Values("If-None-Match"))
	if err != nil {
		problem(w, http.StatusBadRequest, "If-None-Match: %v", err)
		return im, inm, false
	}
	return im, inm, true
}

// decode reads a JSON object body into a new T, answering 415, 413 or 400.
// It returns the body's bytes too.
func (h *Handler[T]) decode(w http.ResponseWriter, r *http.Request) (*T, []byte, bool) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		w.Header().Set("Accept", "application/json")
		problem(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return nil, nil, false
	}
	raw, ok := h.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		problem(w, http.StatusBadRequest, "the body must be a JSON object")
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var e T
	err = dec.Decode(&e)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "malformed JSON body: %v", err)
		return nil, nil, false
	}
	return &e, raw, true
}

// readBody reads the request body up to the limit, answering 413 or 400.
func (h *Handler[T]) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		problem(w, http.StatusRequestEntityTooLarge, "the body is over %d bytes", tooBig.Limit)
		return nil, false
	}
	if err != nil {
		problem(w, http.StatusBadRequest, "reading the body: %v", err)
		return nil, false
	}
	return raw, true
}

// send writes e as JSON with its ETag.
func (h *Handler[T]) send(w http.ResponseWriter, status int, e *T) {
	_, version, _ := h.repo.Adapter().Identity(e)
	w.Header().Set("ETag", ETag(version))
	writeJSON(w, status, "application/json", e)
}

// writeFailed answers a guarded write that did not apply: a stale one 412
// with the current ETag and the fields that differ between the request's
// record and the current one.
func (h *Handler[T]) writeFailed(w http.ResponseWriter, r *http.Request, id any, err error) {
	var stale *locking.StaleDataError
	var se *repository.StaleError[T]
	switch {
	case errors.As(err, &se) && se.Current != nil:
		h.staleAt(w, se.Stale.Actual, se.Fields, "the record changed since the version named in If-Match: it is now at %s", ETag(se.Stale.Actual))
	case errors.As(err, &stale):
		h.preconditionFailedAt(w, true, stale.Actual, "the record changed since the version named in If-Match: it is now at %s", ETag(stale.Actual))
	case errors.Is(err, locking.ErrNotFound):
		h.preconditionFailed(w, r, id, "the record was deleted")
	default:
		h.fail(w, r, err)
	}
}

// preconditionFailed answers 412 with the current ETag, when there is a
// current version.
func (h *Handler[T]) preconditionFailed(w http.ResponseWriter, r *http.Request, id any, detail string) {
	cur, err := h.repo.Get(r.Context(), id)
	if err == nil {
		_, version, _ := h.repo.Adapter().Identity(cur)
		w.Header().Set("ETag", ETag(version))
	}
	problem(w, http.StatusPreconditionFailed, "%s", detail)
}

// staleAt answers 412 for a write at a version that is not the current
// one: the current ETag, and the fields (Go names, answered by their JSON
// names) that differ between the request's record and the current one.
func (h *Handler[T]) staleAt(w http.ResponseWriter, version int64, fields []string, format string, args ...any) {
	w.Header().Set("ETag", ETag(version))
	writeProblem(w, Problem{Status: http.StatusPreconditionFailed, Detail: fmt.Sprintf(format, args...), Fields: h.jsonNames(fields)})
}

func (h *Handler[T]) preconditionFailedAt(w http.ResponseWriter, exists bool, version int64, format string, args ...any) {
	if exists {
		w.Header().Set("ETag", ETag(version))
	}
	problem(w, http.StatusPreconditionFailed, format, args...)
}

// fail answers an error from the repository with its status.
func (h *Handler[T]) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := ProblemOf(err)
	var lease *locking.LeaseError
	switch {
	case p.Status == http.StatusLocked && errors.As(err, &lease):
		if !lease.Until.IsZero() {
			secs := int64(time.Until(lease.Until)/time.Second) + 1
			w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		}
	case p.Status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case p.Status == http.StatusInternalServerError:
		if h.cfg.logError != nil {
			h.cfg.logError(r, err)
		}
		if errors.Is(err, locking.ErrCommitUnknown) && r.Header.Get("Idempotency-Key") != "" {
			p.Detail += "; repeat the request with the same Idempotency-Key: it applies at most once"
		}
	}
	problem(w, p.Status, "%s", p.Detail)
}

// ProblemOf returns the HTTP answer for err, an error of a repository call,
// as the handlers of this package give it: the status, and a detail a user
// may see — it never repeats the error's text, which names tables, keys,
// versions and SQL. Use it in handlers of your own:
//
//	if err != nil {
//		p := rest.ProblemOf(err)
//		log.Printf("%s: %v", r.URL.Path, err) // the full error, for you
//		http.Error(w, p.Detail, p.Status)
//	}
//
// The statuses: ErrVersionMissing (a write that carried no version, see
// locking.ErrVersionMissing) 428 Precondition Required; ErrStaleData (and
// ErrRetriesExhausted, which matches it) 409; ErrConditionFailed 409; ErrAlreadyExists 409; ErrNotFound 404;
// ErrLeased 423; ErrLocked, ErrLockTimeout, ErrDeadlock and
// ErrSerialization 503 (try again); ErrOperationKeyReused 422;
// ErrConstraintViolation 422 (a foreign key, CHECK or NOT NULL refused the
// write); ErrInvalidArgument 400; ErrCommitUnknown and anything else 500.
func ProblemOf(err error) Problem {
	p := func(status int, detail string) Problem {
		return Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
	}
	var lease *locking.LeaseError
	switch {
	case err == nil:
		return p(http.StatusOK, "")
	case errors.As(err, &lease) && errors.Is(err, locking.ErrLeased):
		if lease.Until.IsZero() {
			return p(http.StatusLocked, "the record is checked out (leased)")
		}
		return p(http.StatusLocked, "the record is checked out (leased) until "+lease.Until.UTC().Format(time.RFC3339))
	case errors.Is(err, locking.ErrOperationKeyReused):
		return p(http.StatusUnprocessableEntity, "the Idempotency-Key was used with another request")
	case errors.Is(err, locking.ErrCommitUnknown):
		return p(http.StatusInternalServerError, "the write's outcome is unknown (the database connection failed after it was sent)")
	case errors.Is(err, locking.ErrInvalidArgument):
		var de *locking.DatabaseError
		if errors.As(err, &de) {
			// The database refused a value (too long, not valid text).
			return p(http.StatusBadRequest, "the database refused a value of the request (too long, or not valid text)")
		}
		return p(http.StatusBadRequest, "the request is not valid")
	case errors.Is(err, locking.ErrConstraintViolation):
		return p(http.StatusUnprocessableEntity, "the database refused the change: it breaks a rule of the schema (a reference to another record, a check, or a required value)")
	case errors.Is(err, locking.ErrNotFound):
		return p(http.StatusNotFound, "no such record")
	case errors.Is(err, locking.ErrAlreadyExists):
		// Creates say which value is taken (createConflict); any other
		// write keeps its id, so another unique value is taken.
		return p(http.StatusConflict, detailValueTaken)
	case errors.Is(err, locking.ErrConditionFailed):
		return p(http.StatusConflict, "the record does not allow this change as it is now")
	case errors.Is(err, locking.ErrVersionMissing):
		return p(http.StatusPreconditionRequired, "the request carries no version of the record: send the version it was read at")
	case errors.Is(err, locking.ErrStaleData):
		return p(http.StatusConflict, "the record kept changing; try again")
	case errors.Is(err, locking.ErrLocked), errors.Is(err, locking.ErrLockTimeout),
		errors.Is(err, locking.ErrDeadlock), errors.Is(err, locking.ErrSerialization):
		return p(http.StatusServiceUnavailable, "the database is busy; try again")
	}
	return p(http.StatusInternalServerError, "internal error")
}

// requestPath is the path the client asked for, before any StripPrefix.
func requestPath(r *http.Request) string {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
		return u.EscapedPath()
	}
	return r.URL.EscapedPath()
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Fields is an extension member of a 412 for a stale write: the
	// record's fields (by their JSON names) whose values differ between
	// the request's record and the current one, whose ETag the answer
	// carries. Empty otherwise.
	Fields []string `json:"fields,omitempty"`
}

func problem(w http.ResponseWriter, status int, format string, args ...any) {
	writeProblem(w, Problem{Status: status, Detail: fmt.Sprintf(format, args...)})
}

// writeProblem writes p, with its type and title filled in.
func writeProblem(w http.ResponseWriter, p Problem) {
	p.Type, p.Title = "about:blank", http.StatusText(p.Status)
	writeJSON(w, p.Status, "application/problem+json", p)
}

// jsonNames returns the JSON member names of T's fields named (Go names;
// a field without a JSON name keeps its own). A field the JSON leaves out
// (json:"-") is not the client's to see: it is left out here too.
func (h *Handler[T]) jsonNames(fields []string) []string {
	if len(fields) == 0 {
		return nil
	}
	t := reflect.TypeFor[T]()
	out := make([]string, 0, len(fields))
	for _, name := range fields {
		f, ok := t.FieldByName(name)
		if !ok {
			out = append(out, name)
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if n, _, _ := strings.Cut(tag, ","); n != "" {
			name = n
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// keepHidden sets the fields of dst that T's JSON leaves out (json:"-") to
// their values in from: a request's record, decoded from JSON, holds their
// zero values, which are not the client's to write nor to compare.
func (h *Handler[T]) keepHidden(dst, from *T) {
	d, f := reflect.ValueOf(dst).Elem(), reflect.ValueOf(from).Elem()
	for _, path := range h.hidden {
		d.FieldByIndex(path).Set(f.FieldByIndex(path))
	}
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, contentType = http.StatusInternalServerError, "application/problem+json"
		b, _ = json.Marshal(Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: "the record cannot be encoded as JSON"})
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
