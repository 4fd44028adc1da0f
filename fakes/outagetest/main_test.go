package outagetest_test

import (
	"testing"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

// pgtest.Main checks for leaked goroutines once the tests passed.
func TestMain(m *testing.M) { pgtest.Main(m) }
