package models

import "time"

// Versioned is the optimistic-locking bookkeeping an entity embeds: a version
// that every guarded write checks and advances, and creation/update times.
//
// A version is a clock reading in microseconds, set by the repository (see
// package repository, "Versions"); it only grows. Version 0 is a record
// written before gormlock (at 0 or NULL): a guarded write of an entity read
// from it matches only such a record, and gives it a real version.
type Versioned struct {
	// Version is the record's version; the repository sets and advances it.
	Version int64 `gorm:"column:version;not null" json:"version"`
	// CreatedAt is set when the record is created.
	CreatedAt time.Time `gorm:"column:created_at;not null" json:"created_at"`
	// UpdatedAt is set on every successful write.
	UpdatedAt time.Time `gorm:"column:updated_at;not null" json:"updated_at"`
}

// Model is Versioned with an auto-increment int64 primary key, for entities
// that need no key of their own.
type Model struct {
	// ID is the primary key, assigned by the database on Create.
	ID int64 `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	Versioned
}

// Versioning is the one field gormlock adds to a model that already has
// its key and timestamps, such as one embedding gorm.Model:
//
//	type Product struct {
//		gorm.Model        // ID uint, CreatedAt, UpdatedAt, DeletedAt (soft delete)
//		models.Versioning // Version, checked and advanced by every guarded write
//		Name  string
//	}
//
// The column's default (1) lets AutoMigrate add it to a table that already
// has rows; gormlock gives every record it creates or writes a version of
// its own (see package repository, "Versions").
type Versioning struct {
	// Version is the record's version; the repository sets and advances it.
	Version int64 `gorm:"column:version;not null;default:1" json:"version"`
}
