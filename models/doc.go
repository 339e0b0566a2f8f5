// Package models holds gormlock's embeddable versioned base types and the
// example models used by the examples, the migrations and the tests.
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
//		"github.com/gormlock/gormlock/opendb"
//		"github.com/gormlock/gormlock/repository"
//	)
//
//	type Invoice struct {
//		models.Model
//		Total int64 `gorm:"not null"`
//	}
//
//	func main() {
//		db, err := opendb.SQLite("app.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer opendb.Close(db)
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
// repository.Repository.VerifySchema checks it.
package models
