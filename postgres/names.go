package postgres

import (
	"hash/fnv"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Names: quoted SQL identifiers, the notification channel of a schema, the
// words for job states in errors.

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// channelName is the LISTEN/NOTIFY channel of the queue in schema: channels
// are per database, so the schema is part of the name.
func channelName(schema string) string {
	c := "litequeue." + schema
	if len(c) > 63 {
		h := fnv.New64a()
		h.Write([]byte(schema))
		c = "litequeue." + strconv.FormatUint(h.Sum64(), 16)
	}
	return c
}

func stateWord(st int16) string {
	switch st {
	case 0:
		return "pending"
	case 1:
		return "running"
	case 2:
		return "completed"
	case 4:
		return "cancelled"
	case 5:
		return "waiting"
	}
	return "dead"
}
