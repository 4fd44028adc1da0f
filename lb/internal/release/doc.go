// Package release holds the tests that the lb module installs and is
// required from a module proxy on its own, as users do:
//
//	go install github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb@VERSION
//	go get github.com/holdfast-db/holdfast/lb
//
// TestGoModIsReleasable fails on a replace or exclude directive in go.mod
// or a requirement on the root module. TestInstallFromModuleProxy builds a
// file-system module proxy (GOPROXY=file://...) holding the lb module,
// zipped from this checkout as the Go module mirror would serve a tag, and
// the module cache's own copies of lb's dependencies; then, with
// GOWORK=off, a fresh module cache, no network and outside the repository,
// it runs go install of holdfast-lb (@VERSION and @latest) and runs it,
// and go get of lb into a new module of a user's that imports lb and
// lb/f5, which it builds, vets and runs. It fails if lb needs the root
// module, a replace directive or the workspace. See ../../RELEASING.md.
package release
