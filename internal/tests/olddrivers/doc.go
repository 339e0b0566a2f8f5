// Package olddrivers tests gormlock through the oldest GORM drivers the
// documentation claims: gorm.io/driver/postgres v1.4.1 (pgx v4) and
// gorm.io/driver/mysql v1.4.7, opened the way an application that keeps
// its own gorm.Open does. It is a module of its own, outside go.work, so
// that nothing raises the drivers to the versions the rest of the
// repository uses: make old-drivers runs it with GOWORK=off.
package olddrivers
