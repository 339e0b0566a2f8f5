package models

// Account is an example entity with an integer key: a balance that concurrent
// transfers and increments fight over. Its table is created by the migrations.
type Account struct {
	Model
	Owner   string `gorm:"column:owner;not null" json:"owner"`
	Balance int64  `gorm:"column:balance;not null" json:"balance"`
	Frozen  bool   `gorm:"column:frozen;not null" json:"frozen"`
}

// TableName pins the table name so it does not depend on GORM's naming
// strategy.
func (Account) TableName() string { return "accounts" }

// Document is an example entity with its own string key (a UUID or a slug)
// and free-form attributes, the record of the Couchbase seed's two-writer
// story. Its table is created by the migrations.
type Document struct {
	ID    string            `gorm:"column:id;primaryKey" json:"id"`
	Title string            `gorm:"column:title;not null" json:"title"`
	Attrs map[string]string `gorm:"column:attrs;serializer:json;not null" json:"attrs"`
	Versioned
}

// TableName pins the table name.
func (Document) TableName() string { return "documents" }
