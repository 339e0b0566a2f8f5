// Package web is the storefront's HTTP API and its admin pages.
package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"gorm.io/gorm"

	"example.com/storefront/accounts"
	"example.com/storefront/catalog"
	"example.com/storefront/db"
	"example.com/storefront/orders"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Server serves the API.
type Server struct {
	db        *gorm.DB
	catalog   *catalog.Store
	orders    *orders.Service
	customers *accounts.Customers
	products  *repository.Repository[db.Product]
}

// Routes registers the handlers.
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /products/{id}", s.product)
	mux.HandleFunc("POST /orders", s.placeOrder)
	mux.HandleFunc("POST /orders/{id}/cancel", s.cancelOrder)
	mux.HandleFunc("POST /admin/products/{id}", s.saveProduct)
	mux.HandleFunc("PATCH /admin/products/{id}", s.patchProduct)
	mux.HandleFunc("POST /admin/products/{id}/stock", s.setStock)
	mux.HandleFunc("DELETE /admin/customers/{id}", s.deleteCustomer)
	mux.HandleFunc("POST /admin/categories/{name}/hide", func(w http.ResponseWriter, r *http.Request) {
		// Hiding a category empties its shelves at once.
		err := s.db.WithContext(r.Context()).Model(&db.Product{}).Where("category = ?", r.PathValue("name")).Update("stock", 0).Error // want `unguarded Update of versioned model db.Product`
		reply(w, nil, err)
	})
}

func (s *Server) product(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	p, err := s.catalog.Get(r.Context(), uint(id))
	if err == nil {
		w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(p.Version, 10)))
	}
	reply(w, p, err)
}

func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	var req struct {
		CustomerID uint
		Cart       []orders.Line
		Coupon     string
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o, err := s.orders.Place(r.Context(), req.CustomerID, req.Cart, req.Coupon)
	reply(w, o, err)
}

func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	reply(w, nil, s.orders.Cancel(r.Context(), id))
}

// saveProduct is the admin form: it reads the product, sets what the form
// posted and writes the whole record back.
func (s *Server) saveProduct(w http.ResponseWriter, r *http.Request) {
	var p db.Product
	if err := s.db.WithContext(r.Context()).First(&p, r.PathValue("id")).Error; err != nil {
		reply(w, nil, err)
		return
	}
	p.Name = r.FormValue("name")
	p.Category = r.FormValue("category")
	p.PriceCents, _ = strconv.ParseInt(r.FormValue("price_cents"), 10, 64)
	p.Featured = r.FormValue("featured") == "on"
	reply(w, &p, s.db.WithContext(r.Context()).Save(&p).Error) // want `unguarded Save of versioned model db.Product \(table products\) through Save\(&p\)`
}

// patchProduct is the same form through the API, guarded by If-Match.
func (s *Server) patchProduct(w http.ResponseWriter, r *http.Request) {
	version, err := strconv.ParseInt(r.Header.Get("If-Match"), 10, 64)
	if err != nil {
		http.Error(w, "If-Match is required", http.StatusPreconditionRequired)
		return
	}
	var p db.Product
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
	p.ID, p.Version = uint(id), version
	reply(w, &p, s.products.Update(r.Context(), &p))
}

// setStock is the stocktaking page: the count the clerk typed.
func (s *Server) setStock(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.FormValue("count"), 10, 64)
	if err != nil {
		http.Error(w, "bad count", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	q := gorm.G[db.Product](s.db).Where("id = ?", r.PathValue("id"))
	if v := r.FormValue("version"); v != "" {
		q = q.Where("version = ?", v)
	}
	_, err = q.Update(ctx, "stock", n) // want `unguarded Update of versioned model db.Product \(table products\) through gorm.G\[Product\]`
	reply(w, nil, err)
}

func (s *Server) deleteCustomer(w http.ResponseWriter, r *http.Request) {
	err := s.db.WithContext(r.Context()).Delete(&db.Customer{}, "id = ?", r.PathValue("id")).Error // want `unguarded Delete of versioned model db.Customer`
	reply(w, nil, err)
}

func reply(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, locking.ErrNotFound):
		http.Error(w, "not found", http.StatusNotFound)
	case errors.Is(err, locking.ErrStaleData):
		http.Error(w, "changed since you read it", http.StatusPreconditionFailed)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}
