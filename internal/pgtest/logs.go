package pgtest

import (
	"context"
	"log/slog"
)

// Messages is a slog.Handler for tests that sends the message of each
// record at Level or above to Ch, dropping it when Ch is full.
type Messages struct {
	Ch    chan string
	Level slog.Level
}

// Logger returns a logger whose records go to m.
func (m Messages) Logger() *slog.Logger { return slog.New(m) }

// Enabled, Handle, WithAttrs and WithGroup implement slog.Handler.
func (m Messages) Enabled(_ context.Context, l slog.Level) bool { return l >= m.Level }

func (m Messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m.Ch <- r.Message:
	default:
	}
	return nil
}

func (m Messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m Messages) WithGroup(string) slog.Handler      { return m }
