// Package release holds the test that the lb module installs from a
// module proxy on its own, as users install it:
//
//	go install github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb@VERSION
//
// TestInstallFromModuleProxy builds a file-system module proxy
// (GOPROXY=file://...) holding the lb module, zipped from this checkout
// as the Go module mirror would serve a tag, and the module cache's own
// copies of lb's dependencies, then runs go install with GOWORK=off, a
// fresh module cache and no network: it fails if lb needs the root
// module, a replace directive or the workspace. See ../../RELEASING.md.
package release
