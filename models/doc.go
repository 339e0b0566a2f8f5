// Package models holds gormlock's embeddable versioned base types and the
// example models used by the examples, the migrations and the tests.
//
// Embed Model in an entity whose primary key is an auto-increment integer, or
// Versioned in an entity that declares its own primary key (a string, a UUID):
//
//	type Invoice struct {
//		models.Model
//		Total int64
//	}
//
//	type Page struct {
//		Slug string `gorm:"primaryKey"`
//		Body string
//		models.Versioned
//	}
//
// The version column must be NOT NULL; the migrations in package migrations
// declare it so, and repository.Repository.VerifySchema checks it.
package models
