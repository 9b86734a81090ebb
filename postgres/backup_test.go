package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

func TestBackupIsUnsupportedAndSaysWhatToUseInstead(t *testing.T) {
	u, _ := freshSchema(t)
	q, err := Open(context.Background(), u, nil)
	require.NoError(t, err)
	defer q.Close()
	path := t.TempDir() + "/copy.db"
	err = q.Backup(context.Background(), path)
	require.ErrorIs(t, err, litequeue.ErrUnsupported)
	require.Contains(t, err.Error(), "pg_dump")
	require.NoFileExists(t, path)
}
