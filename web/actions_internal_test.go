package web

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The "post" template function keeps the hidden fields in order, sets the
// button from its keys, and refuses what would draw a broken form.
func TestPostFormTakesPairs(t *testing.T) {
	p := &page{Root: "/admin", CSRF: "tok"}
	f, err := newPostForm(p, "schedules/pause", "name", "a", "label", "Pause", "from", "detail", "class", "secondary", "title", "Stop it")
	require.NoError(t, err)
	require.Equal(t, postForm{Root: "/admin", CSRF: "tok", Path: "schedules/pause",
		Fields: []formField{{"name", "a"}, {"from", "detail"}}, Label: "Pause", Class: "secondary", Title: "Stop it"}, f)

	_, err = newPostForm(p, "queues/pause", "queue", "a", "label")
	require.ErrorContains(t, err, "do not pair up")
	_, err = newPostForm(p, "queues/pause", "queue", "a")
	require.ErrorContains(t, err, "no label")
}
