package rest

import (
	"fmt"
	"net/http"
	"strings"
)

// Mount serves h on mux at prefix, a literal path such as "/documents": the
// collection at both "/documents" and "/documents/", and each record at
// "/documents/{id}", with the prefix stripped from the path h sees (as
// http.StripPrefix does). Registering only "/documents/" would leave
// "/documents" to ServeMux's redirect, which creates nothing on a POST, and
// loses the body for a client that does not follow it.
//
// A trailing slash on prefix is ignored; "" or "/" serves h at the root.
// Mount panics, as ServeMux.Handle does, on a prefix that does not begin
// with "/" or holds a wildcard, an escape or a space (it is a path, not a
// pattern), or whose patterns conflict with ones mux already has.
func Mount(mux *http.ServeMux, prefix string, h http.Handler) {
	p := strings.TrimRight(prefix, "/")
	if p == "" {
		mux.Handle("/", h)
		return
	}
	if p[0] != '/' || strings.ContainsAny(p, "{}% \t\r\n") {
		panic(fmt.Sprintf("rest: Mount: prefix %q must be a literal path beginning with /", prefix))
	}
	stripped := http.StripPrefix(p, h)
	mux.Handle(p, stripped)
	mux.Handle(p+"/", stripped)
}
