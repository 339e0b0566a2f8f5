// Package models holds what an application's entities embed for gormlock:
// [Model] (an auto-increment key and the version), [Versioned] (the version
// and the creation and update times, beside a key of the entity's own) and
// [Versioning] (the version alone, beside gorm.Model, or beside a key and
// times of the entity's own).
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//
//		"github.com/gormlock/gormlock/models"
//		"github.com/gormlock/gormlock/opendb/sqlite"
//		"github.com/gormlock/gormlock/repository"
//	)
//
//	type Invoice struct {
//		models.Model
//		Total int64 `gorm:"not null"`
//	}
//
//	func main() {
//		db, err := sqlite.Open("app.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		if err := db.AutoMigrate(&Invoice{}); err != nil {
//			log.Fatal(err)
//		}
//		invoices, err := repository.New[Invoice](db)
//		if err != nil {
//			log.Fatal(err)
//		}
//		inv := &Invoice{Total: 100}
//		if err := invoices.Create(context.Background(), inv); err != nil {
//			log.Fatal(err)
//		}
//		fmt.Println(inv.ID, inv.Version > 0)
//	}
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
// The version column must be NOT NULL: declare it so in your own migrations
// (GORM's AutoMigrate does, from the field's tag), and
// [github.com/gormlock/gormlock/repository.Repository.VerifySchema] checks it. The guide
// docs/getting-started.md says what a version is, and
// docs/coming-from-gorm.md how to add one to an existing gorm.Model.
package models
