# stripefs: `make run` starts a whole filesystem on this machine and mounts
# it; `make test` runs every test (as root, with /dev/fuse).
GO      ?= go
BIN     := bin/stripefs
RUNDIR  ?= $(CURDIR)/run
FUZZTIME ?= 100000x
# FuzzServerConn runs a whole server per input, 20 times slower than the
# codecs' targets: its brief run is a third of theirs (~12 s).
FUZZTIME_CONN ?= 30000x
# Packages whose state is shared between goroutines: tested with -race.
RACE_PKGS := ./wire/... ./rpc/... ./perm/... ./find/... ./nodemap/... ./layout/... ./proto/... ./ldlm/... ./fs/... ./mds/... ./ost/... ./cluster/... ./nfsexport/... ./fsck/... ./internal/... ./metrics/...

.PHONY: build run test test-unit test-e2e test-e2e-rest test-e2e-race fuzz lint bench bench-dne soak install clean proto

build:
	$(GO) build -o $(BIN) ./cmd/stripefs

run: build
	@mkdir -p $(RUNDIR)/data $(RUNDIR)/mnt
	@echo "stripefs: data in $(RUNDIR)/data, mounted at $(RUNDIR)/mnt (Ctrl-C unmounts and stops)"
	./$(BIN) up --data $(RUNDIR)/data --mount $(RUNDIR)/mnt -o allow_other

# The tests of the race pass (test-e2e-race) run there only: a second,
# plain run of each took 61 of the plain pass's 330 seconds.
test: lint test-unit test-e2e-rest test-e2e-race fuzz

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test-unit:
	$(GO) test -race -count=1 $(RACE_PKGS)

test-e2e: build
	$(GO) test -count=1 -timeout 30m ./e2e/... ./bench/... ./cmd/... ./deploy/...

test-e2e-rest: build
	$(GO) test -count=1 -timeout 30m -skip '^Test($(E2E_RACE_TESTS))$$' ./e2e/... ./bench/... ./cmd/... ./deploy/...

# The restart, recovery, fault and data-path tests, the metrics scrapes,
# fallocate, the file attribute cache across mounts and large FUSE
# requests (with a takeover), with the server
# and mount processes built with the race detector (a race they report
# fails the test).
E2E_RACE_TESTS := Kill9Restart|LargeRequests|MDTKilledDuringMkdirStorm|MDTRestartMkdirPStorm|OSTOutage|FullDisks|OSTFullENOSPC|NFSPatternCoalesced|WriteMixes|KilledHolderIsEvicted|Metrics|FallocateLikeLocal|Takeover|CopyFileRange|PFL|PFLEC|DoM|AttrsAcrossMounts|DoMReadOnOpen|DoMCloseCarriesWrite|TimesAfterClose
test-e2e-race:
	STRIPEFS_E2E_RACE=1 $(GO) test -count=1 -timeout 20m -run '^Test($(E2E_RACE_TESTS))$$' ./e2e/

# Brief runs of each fuzz target, counted in executions: a duration can end
# in a spurious "context deadline exceeded" on a loaded machine (Go 1.26's
# fuzz coordinator, golang/go#75804). Longer runs: make fuzz FUZZTIME=20000000x FUZZTIME_CONN=2000000x
fuzz:
	$(GO) test ./wire -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./rpc -run '^$$' -fuzz '^FuzzDecodeHeader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./rpc -run '^$$' -fuzz '^FuzzServerConn$$' -fuzztime $(FUZZTIME_CONN)
	$(GO) test ./rpc -run '^$$' -fuzz '^FuzzHandshake$$' -fuzztime $(FUZZTIME)
	$(GO) test ./layout -run '^$$' -fuzz '^FuzzECRow$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proto -run '^$$' -fuzz '^FuzzParseLayout$$' -fuzztime $(FUZZTIME)
	$(GO) test ./mds/dtx -run '^$$' -fuzz '^FuzzRecordCodec$$' -fuzztime $(FUZZTIME)
	$(GO) test ./mds -run '^$$' -fuzz '^FuzzInodeCodec$$' -fuzztime $(FUZZTIME)

bench: build
	./$(BIN) bench baseline

# Multi-client soaks kept out of the default run: longer forms of e2e
# tests, for rare races (README).
soak: build
	STRIPEFS_SOAK=1 $(GO) test -count=1 -run 'Soak$$' ./e2e/

# The distributed-namespace targets with each MDT in a server process of
# its own (bench/scripts/dne-servers.sh); `stripefs bench dne --mount MNT`
# measures a mount of `make run` the same way.
bench-dne: build
	STRIPEFS=./$(BIN) bench/scripts/dne-servers.sh

# The binary, mount(8)'s helper, and the systemd units (an existing
# /etc/stripefs/stripefs.conf is kept).
install: build
	install -m 0755 $(BIN) /usr/local/bin/stripefs
	ln -sf /usr/local/bin/stripefs /sbin/mount.fuse.stripefs
	install -d /etc/systemd/system /etc/stripefs
	install -m 0644 deploy/systemd/stripefs-mds@.service deploy/systemd/stripefs-ost@.service deploy/systemd/stripefs-nfs.service /etc/systemd/system/
	[ -e /etc/stripefs/stripefs.conf ] || install -m 0644 deploy/systemd/stripefs.conf /etc/stripefs/stripefs.conf
	-systemctl daemon-reload 2>/dev/null

# The stored records' schema (internal/recordpb): run after editing
# records.proto; needs protoc (apt-get install protobuf-compiler),
# protoc-gen-go (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12)
# and protoc-gen-go-vtproto (go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0).
proto:
	cd internal/recordpb && protoc --go_out=. --go_opt=paths=source_relative \
		--go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size records.proto

clean:
	rm -rf bin
