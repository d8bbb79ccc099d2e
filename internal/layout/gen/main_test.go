package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestLayoutHeaderIsCurrent: the C init's lists are package layout's; a path
// added there and not regenerated would leave the host uncovered in every
// sandbox. Run go generate ./internal/layout when this fails.
func TestLayoutHeaderIsCurrent(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(headerPath)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, header()) {
		t.Errorf("%s is stale: run go generate ./internal/layout", headerPath)
	}
}
