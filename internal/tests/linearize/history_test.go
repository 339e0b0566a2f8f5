package linearize_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/gormlock/gormlock/internal/tests/linearize"
)

// Concurrent clients record through one Recorder; every operation comes
// back from ReadHistory intact, with its return no earlier than its call.
func TestRecorderConcurrent(t *testing.T) {
	const clients, perClient = 8, 200
	var buf bytes.Buffer
	rec := linearize.NewRecorder(&buf)
	start := make(chan struct{})
	var g errgroup.Group
	for c := range clients {
		g.Go(func() error {
			<-start
			for i := range perClient {
				p := rec.Begin(linearize.Op{Client: c, Key: "k", Kind: linearize.KindIncrement, Delta: int64(i)})
				if err := p.End(linearize.ResultOK, int64(i), int64(c*perClient+i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	close(start)
	require.NoError(t, g.Wait())
	require.NoError(t, rec.Err())

	ops, err := linearize.ReadHistory(&buf)
	require.NoError(t, err)
	require.Len(t, ops, clients*perClient)
	seen := make(map[int64]bool)
	for i, op := range ops {
		require.GreaterOrEqual(t, op.Return, op.Call)
		require.Equal(t, op.Delta, op.OutValue)
		require.Equal(t, int64(op.Client*perClient)+op.Delta, op.OutVersion)
		seen[op.OutVersion] = true
		if i > 0 {
			require.LessOrEqual(t, ops[i-1].Call, op.Call, "ordered by call")
		}
	}
	require.Len(t, seen, clients*perClient)
}

// ReadHistory merges several files into one history ordered by call.
func TestReadHistoryMerges(t *testing.T) {
	a := `{"client":0,"key":"k","kind":"create","value":1,"result":"ok","out_version":1,"call":10,"return":20}
{"client":0,"key":"k","kind":"read","result":"ok","out_value":1,"out_version":1,"call":30,"return":40}
`
	b := `
{"client":1,"key":"k","kind":"update","expected":1,"value":2,"result":"stale","call":15,"return":35}
`
	ops, err := linearize.ReadHistory(strings.NewReader(a), strings.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, []linearize.Op{
		{Client: 0, Key: "k", Kind: linearize.KindCreate, Value: 1, Result: linearize.ResultOK, OutVersion: 1, Call: 10, Return: 20},
		{Client: 1, Key: "k", Kind: linearize.KindUpdate, Expected: 1, Value: 2, Result: linearize.ResultStale, Call: 15, Return: 35},
		{Client: 0, Key: "k", Kind: linearize.KindRead, Result: linearize.ResultOK, OutValue: 1, OutVersion: 1, Call: 30, Return: 40},
	}, ops)
}

// A bad line is an error naming the file and the line.
func TestReadHistoryErrors(t *testing.T) {
	good := `{"client":0,"key":"k","kind":"read","result":"not-found","call":1,"return":2}` + "\n"
	for name, bad := range map[string]string{
		"not JSON":      `{"client":0,`,
		"unknown field": `{"client":0,"key":"k","kind":"read","result":"not-found","call":1,"return":2,"colour":"red"}`,
		"two values":    `{"client":0,"key":"k","kind":"read","result":"not-found","call":1,"return":2} {}`,
		"bad result":    `{"client":0,"key":"k","kind":"read","result":"stale","call":1,"return":2}`,
		"bad kind":      `{"client":0,"key":"k","kind":"upsert","result":"ok","call":1,"return":2}`,
		"time reversed": `{"client":0,"key":"k","kind":"read","result":"not-found","call":3,"return":2}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := linearize.ReadHistory(strings.NewReader(good), strings.NewReader(good+bad+"\n"))
			require.ErrorContains(t, err, "history 1 line 2")
		})
	}
}

// A result the kind cannot have is refused, and poisons the Recorder: a
// history with an operation missing cannot be checked soundly.
func TestRecorderRefusesBadResult(t *testing.T) {
	var buf bytes.Buffer
	rec := linearize.NewRecorder(&buf)
	p := rec.Begin(linearize.Op{Client: 0, Key: "k", Kind: linearize.KindCreate, Value: 1})
	require.Error(t, p.End(linearize.ResultStale, 0, 0))
	require.Error(t, rec.Err())

	next := rec.Begin(linearize.Op{Client: 0, Key: "k", Kind: linearize.KindRead})
	require.Error(t, next.End(linearize.ResultNotFound, 0, 0))
	require.Zero(t, buf.Len())
}

// Ending an operation twice is an error and records it once.
func TestPendingEndTwice(t *testing.T) {
	var buf bytes.Buffer
	rec := linearize.NewRecorder(&buf)
	p := rec.Begin(linearize.Op{Client: 0, Key: "k", Kind: linearize.KindDelete, Expected: 3})
	require.NoError(t, p.End(linearize.ResultOK, 0, 0))
	require.Error(t, p.End(linearize.ResultOK, 0, 0))
	ops, err := linearize.ReadHistory(&buf)
	require.NoError(t, err)
	require.Len(t, ops, 1)
}

// A failed write is returned by End and by every later End.
func TestRecorderWriteError(t *testing.T) {
	broken := errors.New("disk full")
	rec := linearize.NewRecorder(failingWriter{broken})
	p := rec.Begin(linearize.Op{Client: 0, Key: "k", Kind: linearize.KindRead})
	require.ErrorIs(t, p.End(linearize.ResultNotFound, 0, 0), broken)
	require.ErrorIs(t, rec.Err(), broken)
	q := rec.Begin(linearize.Op{Client: 0, Key: "k", Kind: linearize.KindRead})
	require.ErrorIs(t, q.End(linearize.ResultNotFound, 0, 0), broken)
}

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
