package sqlite

import "github.com/litequeue/litequeue/internal/sqlitefile"

// Execer is what the store's statements run on: the writer's connection
// inside its transaction, a read transaction, or the application's *sql.Tx.
type Execer = sqlitefile.Execer

// SchemaVersion is the version of the queue file format this build writes.
const SchemaVersion = sqlitefile.SchemaVersion
