# The Makefile mirrors CI: .ci/run calls "make test".
.PHONY: help demo test test-short first-commands fmt vet lint unit apicheck api pgxsuite stdlibsuite bench fuzz lb-screenshots

# Every Go module of the repository; vet, lint and unit run in each. lb is
# its own module (the load-balancer drain and its CLI), nested in this one.
MODULES := . lb

# in_modules runs a command in every module and stops at the first failure.
in_modules = set -e; for m in $(MODULES); do echo "==> $$m: $(1)"; (cd $$m && $(1)); done

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

demo: ## run the main demo (needs Go and the PostgreSQL server binaries)
	go run ./examples/switchover

test: first-commands fmt vet lint unit pgxsuite stdlibsuite ## every check CI runs (19 to 21 min on CI's 2 cores)

test-short: ## the unit tests of every module with -short, no race detector: the long integration tests skip (under 3 min)
	@$(call in_modules,go test -short -count=1 ./...)

first-commands: ## fail if a fresh clone's first commands (go run, go list -m all, go build, go vet) change a tracked file
	scripts/first-commands

fmt: ## fail if gofmt would change a file, in any module
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet, in every module
	@$(call in_modules,go vet ./...)

lint: ## staticcheck, pinned, in every module
	@$(call in_modules,go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...)

unit: ## all tests with the race detector, against real PostgreSQL servers, in every module (internal/faults alone, last)
	scripts/unit $(MODULES)

apicheck: ## only the API check (in unit too): fail if an exported name differs from api/holdfast.txt, lb/api/lb.txt
	go test -count=1 ./internal/apicheck

api: ## rewrite api/holdfast.txt and lb/api/lb.txt from the code, after a reviewed API change
	go test -count=1 -run '^TestAPI$$' ./internal/apicheck -update

pgxsuite: ## pgx's own pgxpool tests with every pool configured by holdfast, in each mode
	scripts/pgxpool-suite

stdlibsuite: ## pgx's own database/sql (stdlib) tests with every *sql.DB through sqldb, in each mode
	scripts/stdlib-suite

bench: ## holdfast against plain pgxpool, same run, same server
	go test -run '^$$' -bench . -benchmem -count 5 .

fuzz: ## fuzz the classifier, and cloudsql's and alloydb's rules on Google's error types, a minute each
	go test -run '^$$' -fuzz FuzzClassify -fuzztime 60s ./classify/
	go test -run '^$$' -fuzz FuzzTypeRules -fuzztime 60s ./cloudsql/
	go test -run '^$$' -fuzz FuzzTypeRules -fuzztime 60s ./alloydb/

lb-screenshots: ## lb: the console's screenshots in docs/lb/, made by its browser tests (needs chromium)
	mkdir -p docs/lb
	cd lb && HOLDFAST_REQUIRE_BROWSER=1 HOLDFAST_LB_SCREENSHOTS=$(CURDIR)/docs/lb go test -count=1 -run Browser ./console/
