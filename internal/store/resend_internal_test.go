package store

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/gormlock/gormlock/locking"
)

type sqlStateError string

func (e sqlStateError) Error() string    { return "ERROR: SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

// A statement PostgreSQL refused before running it is sent again outside a
// transaction, a bounded number of times; never in a transaction (the
// refusal aborted it), never for another error or an unknown outcome.
func TestSendAgainOnlyARefusedStatementOutsideATransaction(t *testing.T) {
	db := &sql.DB{}
	tx := &sql.Tx{}
	for _, code := range []string{"26000", "42P05", "0A000"} {
		if !sendAgain(db, sqlStateError(code), 1) {
			t.Errorf("%s outside a transaction: want sent again", code)
		}
		if sendAgain(tx, sqlStateError(code), 1) {
			t.Errorf("%s in a transaction: want not sent again", code)
		}
		if sendAgain(db, sqlStateError(code), maxNotSentRetries) {
			t.Errorf("%s after %d tries: want no more", code, maxNotSentRetries)
		}
	}
	for _, err := range []error{nil, sqlStateError("42P01"), errors.New("conn closed"), locking.Unknown(sqlStateError("26000"))} {
		if sendAgain(db, err, 1) {
			t.Errorf("%v: want not sent again", err)
		}
	}
}
