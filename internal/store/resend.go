package store

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// simpleProtocol caches, per database, whether its connections send
// statements with pgx's simple protocol.
var simpleProtocol sync.Map // *sql.DB -> bool

// resends reports whether conn, a connection of db, is one on which the
// driver's "not sent" mark (driver.ErrBadConn, pgconn's SafeToRetry) cannot
// be trusted: a pgx connection whose default_query_exec_mode is
// simple_protocol (as DSN or as gorm.io/driver/postgres's
// PreferSimpleProtocol sets it) marks a statement whose answer was lost as
// safe to retry although the server ran it. With the extended protocol,
// which every other mode uses for statements with parameters, pgx sets the
// mark only when nothing was written. The answer is read once per database,
// from the driver's connection; when it cannot be read, the mark is not
// trusted.
func resends(db *sql.DB, conn *sql.Conn) bool {
	if v, ok := simpleProtocol.Load(db); ok {
		return v.(bool)
	}
	simple := true // when the driver's connection cannot be read: distrust
	if err := conn.Raw(func(dc any) error {
		simple = pgxExecMode(dc) == "simple_protocol"
		return nil
	}); err == nil {
		simpleProtocol.Store(db, simple)
	}
	return simple
}

// pgxExecMode returns the default_query_exec_mode of dc when it is a
// connection of pgx's database/sql driver, or "" for any other driver. It
// reads it through pgx's exported methods and fields by reflection:
// (*stdlib.Conn).Conn().Config().DefaultQueryExecMode, whose String is the
// mode's name, returned as the DSN spells it. gormlock imports no driver.
func pgxExecMode(dc any) (mode string) {
	defer func() {
		if recover() != nil {
			mode = ""
		}
	}()
	v := reflect.ValueOf(dc)
	conn := v.MethodByName("Conn")
	if !conn.IsValid() || conn.Type().NumIn() != 0 || conn.Type().NumOut() != 1 {
		return ""
	}
	c := conn.Call(nil)[0]
	config := c.MethodByName("Config")
	if !config.IsValid() || config.Type().NumIn() != 0 || config.Type().NumOut() != 1 {
		return ""
	}
	cfg := reflect.Indirect(config.Call(nil)[0])
	if cfg.Kind() != reflect.Struct {
		return ""
	}
	f := cfg.FieldByName("DefaultQueryExecMode")
	if !f.IsValid() || !f.CanInterface() {
		return ""
	}
	if s, ok := f.Interface().(fmt.Stringer); ok {
		// pgx spells the modes with spaces ("simple protocol"); the DSN
		// with underscores.
		return strings.ReplaceAll(s.String(), " ", "_")
	}
	return ""
}
