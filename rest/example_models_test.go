// The database and the entity of the package's examples: what an
// application opens and declares itself. The examples import public
// packages only, so that they can be copied as they are.

package rest_test

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/models"
)

// db is the application's database in the examples: a *gorm.DB opened
// with one of gormlock's openers (opendb/sqlite's Open, opendb/postgres's,
// ...), with gormlock's tables (migrations.Up) and the documents table
// (db.AutoMigrate(&Document{})). The examples need a database, so go test
// compiles them here without running them; each one's last comment says
// what it prints on a fresh SQLite database.
var db *gorm.DB

// Document is an example entity with its own string key (a UUID or a slug)
// and free-form attributes.
type Document struct {
	ID    string     `gorm:"column:id;primaryKey" json:"id"`
	Title string     `gorm:"column:title;not null" json:"title"`
	Attrs Attributes `gorm:"column:attrs;not null" json:"attrs"`
	models.Versioned
}

// TableName pins the table name.
func (Document) TableName() string { return "documents" }

// Attributes is a document's free-form string fields, stored as a JSON object
// in a text column. A nil map is stored as {}.
type Attributes map[string]string

// MarshalJSON writes a nil map as {}, as it is stored, so a record sent
// before and after a round trip through the database is the same JSON.
func (a Attributes) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]string(a))
}

// Value implements driver.Valuer.
func (a Attributes) Value() (driver.Value, error) {
	if a == nil {
		return "{}", nil
	}
	b, err := json.Marshal(map[string]string(a))
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// Scan implements sql.Scanner.
func (a *Attributes) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*a = nil
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("attributes: cannot scan %T", src)
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("attributes: %w", err)
	}
	*a = m
	return nil
}
