// Package model holds the test application's models, one per way a model
// is versioned or not.
package model

import (
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/models"
)

// Token embeds models.Versioning beside gorm.Model.
type Token struct {
	gorm.Model
	models.Versioning
	Key         string
	Name        string
	RemainQuota int64
	UsedQuota   int64
}

// Account embeds models.Model.
type Account struct {
	models.Model
	Owner   string
	Balance int64
}

// Doc embeds models.Versioned beside a key of its own.
type Doc struct {
	ID string `gorm:"primaryKey"`
	models.Versioned
	Title string
}

// Tagged has its version under another name.
type Tagged struct {
	ID  int64
	Rev int64 `gormlock:"version"`
	N   int64
}

// Plain has an int64 field named Version, so it is versioned.
type Plain struct {
	ID      int64
	Version int64
	N       int64
}

// Custom names its table.
type Custom struct {
	ID int64
	models.Versioning
	N int64
}

// TableName is Custom's table.
func (Custom) TableName() string { return "custom_things" }

// Note's Version is a string: repository.New refuses it, so it is not
// versioned.
type Note struct {
	ID      int64
	Version string
	Body    string
}

// Log has no version.
type Log struct {
	ID  int64
	Msg string
}

// Hidden's Version has no column.
type Hidden struct {
	ID      int64
	Version int64 `gorm:"-"`
	N       int64
}

// ReadOnly's Version cannot be written: repository.New refuses it.
type ReadOnly struct {
	ID      int64
	Version int64 `gorm:"->"`
	N       int64
}
