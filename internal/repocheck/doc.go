// Package repocheck holds checks of the repository as a whole, both of its
// modules (the root and lb) included: what gofmt, go vet and staticcheck
// do not look at. It has no code; its tests are the checks.
//
// TestImportGroups: every Go file groups its imports as goimports does,
// the standard library first and alone.
//
// TestReadmeCommands: the README names only make targets the Makefile
// has, and says what make test costs (its duration, what it downloads)
// and how long make test-short takes.
package repocheck
