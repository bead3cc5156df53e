# tickd: delayed HTTP callbacks on Redis.
#
#   make            build build/tickd and build/tickctl (the command-line client)
#   make run        install missing packages, build both, start a local Redis if
#                   none is reachable, run tickd on :8080
#   make test       unit tests (plain and under ASan+UBSan), then the
#                   integration tests against real redis-server processes,
#                   with build/tickd and again with build/tickd-san
#   make fuzz       run each libFuzzer target tests/fuzz/fuzz_<name>.c for
#                   FUZZ_SECONDS (default 60) on tests/fuzz/corpus/<name>/
#   make fuzz-replay  every target once over its kept corpus (part of test)
#   make bench      benchmarks (bench/README.md)
#   make chaos      3 tickd replicas on a Redis Cluster under random faults for
#                   CHAOS_SECONDS (default 300; CHAOS_SEED replays a fault
#                   plan), then a checker (tests/chaos/README.md)
#   make config-reference  conf/tickd.ini and doc/configuration.md, from the
#                   config table (src/base/config.c)
#   make deb        the Debian package build/deb/tickd_<version>_<arch>.deb
#                   (debian/; tested by make test)

CC      ?= cc
PREFIX  ?= /usr/local
OPT     ?= -O2
WARN     = -Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wformat=2 \
           -Wshadow -Wpointer-arith -Werror
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g $(WARN) -D_GNU_SOURCE -iquote src -MMD -MP
LDLIBS   = -lhiredis -lcurl -lcjson -levent -levent_pthreads -linih -lpthread -lm -lssl -lcrypto
SANITIZE ?= address,undefined
SANFLAGS = -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all

# libFuzzer targets: clang, sanitizers on, the src objects built apart
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZFLAGS = -std=c11 -g -O1 -Wall -Wextra -D_GNU_SOURCE -iquote src -MMD -MP \
            -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1

# src/<layer>/*.c: the layers and what each may use are in src/README.md
LAYERS  := base model store delivery core edge
SRCS    := $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c))
# doc/openapi.yaml, built in as JSON (GET /v1/openapi.json), and the web
# console's files (web/, served at /ui/)
OBJS    := $(SRCS:src/%.c=build/obj/%.o) build/obj/openapi.o build/obj/ui_assets.o
SOBJS   := $(SRCS:src/%.c=build/san/%.o) build/san/openapi.o build/san/ui_assets.o
UNITS   := $(wildcard tests/unit/test_*.c)
UBINS   := $(UNITS:tests/unit/%.c=build/unit/%)
SUBINS  := $(UNITS:tests/unit/%.c=build/unit-san/%)
FOBJS   := $(SRCS:src/%.c=build/fuzz/obj/%.o) build/fuzz/obj/openapi.o build/fuzz/obj/ui_assets.o
FUZZERS := $(wildcard tests/fuzz/fuzz_*.c)
FBINS   := $(FUZZERS:tests/fuzz/%.c=build/fuzz/%)
# tickctl: cmd/tickctl on libcurl, cJSON, libevent (listen) and libcrypto,
# with the src modules it shares with tickd (RFC 3339 times, signatures)
CTL_SRCS := $(wildcard cmd/tickctl/*.c)
CTL_OBJS := $(CTL_SRCS:cmd/tickctl/%.c=build/ctl/%.o) \
            build/obj/model/task.o build/obj/base/trace.o build/obj/delivery/webhook.o \
            build/obj/base/util.o build/obj/base/log.o build/obj/base/tz.o
CTL_LDLIBS = -lcurl -lcjson -levent -lcrypto

.PHONY: all run test soak bounds unit unit-san boundary integration integration-san node-deps deps bench bench-wheel bench-scale clean config-reference \
        install uninstall fuzz fuzz-build fuzz-replay chaos
all: build/tickd build/tickctl

build/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<
build/san/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -c -o $@ $<
build/obj/main.o: cmd/tickd/main.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<
build/san/main.o: cmd/tickd/main.c | build/san
	$(CC) $(CFLAGS) $(SANFLAGS) -c -o $@ $<

build/gen/openapi.c: doc/openapi.yaml scripts/openapi_c.py | build/gen
	/usr/bin/python3 scripts/openapi_c.py $< $@
build/obj/openapi.o: build/gen/openapi.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<
build/san/openapi.o: build/gen/openapi.c | build/san
	$(CC) $(CFLAGS) $(SANFLAGS) -c -o $@ $<
build/fuzz/obj/openapi.o: build/gen/openapi.c | build/fuzz/obj
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

# The console (web/): its sources and the two libraries it ships, pinned by
# web/package-lock.json (npm ci runs only when the lock changed), made into
# one C file of content-hashed, pre-gzipped files (scripts/ui_c.py).
WEB_SRCS = $(wildcard web/src/*)
WEB_DEPS = web/node_modules/.package-lock.json
$(WEB_DEPS): web/package.json web/package-lock.json
	@command -v npm >/dev/null 2>&1 || scripts/deps.sh
	cd web && npm ci --no-audit --no-fund
build/gen/ui_assets.c: $(WEB_SRCS) $(WEB_DEPS) scripts/ui_c.py | build/gen
	/usr/bin/python3 scripts/ui_c.py web $@
build/obj/ui_assets.o: build/gen/ui_assets.c | build/obj
	$(CC) $(CFLAGS) -c -o $@ $<
build/san/ui_assets.o: build/gen/ui_assets.c | build/san
	$(CC) $(CFLAGS) $(SANFLAGS) -c -o $@ $<
build/fuzz/obj/ui_assets.o: build/gen/ui_assets.c | build/fuzz/obj
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

build/tickd: build/obj/main.o $(OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/ctl/%.o: cmd/tickctl/%.c | build/ctl
	$(CC) $(CFLAGS) -c -o $@ $<
build/tickctl: $(CTL_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(CTL_LDLIBS)
build/tickd-san: build/san/main.o $(SOBJS)
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $^ $(LDLIBS)

# $^ would also hold what the .d files name (a test that includes a .c)
build/unit/%: tests/unit/%.c $(OBJS) | build/unit
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(LDLIBS) -lcmocka
build/unit-san/%: tests/unit/%.c $(SOBJS) | build/unit-san
	$(CC) $(CFLAGS) $(SANFLAGS) -o $@ $< $(filter %.o,$^) $(LDLIBS) -lcmocka

build/fuzz/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FOBJS) | build/fuzz/obj
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $(filter %.c %.o,$^) $(LDLIBS)

# prints tickd's cron runs for the oracle tests (test_cron_oracle.py)
build/tools/cron_next: tests/tools/cron_next.c $(OBJS) | build/tools
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
# prints a script as tickd loads it (harness.lua_source, make bench)
build/tools/script_link: tests/tools/script_link.c $(OBJS) | build/tools
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
# prints the configuration reference from the config table
build/tools/config_reference: tests/tools/config_reference.c $(OBJS) | build/tools
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The files generated from the config table (src/base/config.c) and
# committed: the commented default file and the reference. make test checks
# that both are what the table gives (test_cli.py, test_docs.py).
conf/tickd.ini: build/tickd
	build/tickd --print-config > $@.tmp && mv $@.tmp $@
doc/configuration.md: build/tools/config_reference
	build/tools/config_reference > $@.tmp && mv $@.tmp $@
config-reference: conf/tickd.ini doc/configuration.md

build/obj build/san build/ctl build/unit build/unit-san build/bench build/fuzz/obj build/tools \
  build/install build/gen:
	mkdir -p $@

deps:
	@scripts/deps.sh

# The layers are folders (src/README.md): a file includes headers of its own
# layer and of the layers below it, which scripts/layers.sh checks for every
# file under src/ and cmd/. store/ is the boundary: nothing outside it may
# reach hiredis; every other file is compiled with a hiredis.h that is an
# #error, so a new file cannot escape either rule.
build/boundary/hiredis/hiredis.h:
	mkdir -p $(@D) && echo '#error "hiredis outside src/store/: see src/README.md"' > $@
boundary: build/boundary/hiredis/hiredis.h
	@scripts/layers.sh
	@for f in $(filter-out src/store/%,$(SRCS)) cmd/tickd/main.c $(CTL_SRCS); do \
	  $(CC) -std=c11 -D_GNU_SOURCE -iquote src -iquote cmd/tickctl -Ibuild/boundary -fsyntax-only $$f || exit 1; done

unit: boundary $(UBINS)
	@set -e; for t in $(UBINS); do echo "== $$t"; $$t; done
unit-san: $(SUBINS)
	@set -e; for t in $(SUBINS); do echo "== $$t"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

fuzz-build: $(FBINS)
# kept: make would delete them as intermediates of the pattern rules
.SECONDARY: $(FOBJS)

# New inputs go to build/fuzz/new/<name>/ (merge the useful ones into the
# kept corpus with -merge=1); a crash is saved in build/fuzz/crashes/<name>/
# and belongs in the kept corpus once fixed. Every target runs; any finding
# fails the run at the end. tests/fuzz/<name>.dict is used when present.
fuzz: $(FBINS)
	@rc=0; for b in $(FBINS); do n=$${b#build/fuzz/fuzz_}; \
	  mkdir -p tests/fuzz/corpus/$$n build/fuzz/new/$$n build/fuzz/crashes/$$n; \
	  dict=; [ -f tests/fuzz/$$n.dict ] && dict=-dict=tests/fuzz/$$n.dict; \
	  echo "== $$b: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_ENV) $$b -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$dict \
	    -artifact_prefix=build/fuzz/crashes/$$n/ build/fuzz/new/$$n tests/fuzz/corpus/$$n \
	    || { rc=1; echo "== $$b: FINDING in build/fuzz/crashes/$$n/"; }; \
	done; exit $$rc

# Each kept input run once, as files (no fuzzing): any sanitizer report fails.
fuzz-replay: $(FBINS)
	@set -e; for b in $(FBINS); do n=$${b#build/fuzz/fuzz_}; d=tests/fuzz/corpus/$$n; \
	  files=$$(find $$d -type f 2>/dev/null | sort); \
	  [ -n "$$files" ] || { echo "$$b: no corpus in $$d"; exit 1; }; \
	  echo "== $$b: $$(echo "$$files" | wc -l) inputs"; \
	  $(FUZZ_ENV) $$b -runs=1 $$files >build/fuzz/replay-$$n.log 2>&1 \
	    || { tail -40 build/fuzz/replay-$$n.log; exit 1; }; \
	done

# npm packages the tests check against (tests/node): the Standard Webhooks
# verifier and the croner cron oracle; npm ci runs only when the lock changed
NODE_DEPS = tests/node/node_modules/.package-lock.json
$(NODE_DEPS): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund
node-deps: $(NODE_DEPS)

integration: build/tickd build/tickctl build/tools/cron_next build/tools/config_reference build/tools/script_link $(NODE_DEPS)
	/usr/bin/python3 tests/integration/run.py

# The same suite against the ASan+UBSan build: a sanitizer report in any
# tickd's log fails its test (conftest.py); only the RSS bound of the
# pipelined flood is skipped (an ASan build's RSS is its shadow memory).
integration-san: build/tickd-san build/tickctl build/tools/cron_next build/tools/config_reference build/tools/script_link $(NODE_DEPS)
	SANITIZED_BUILD=1 TICKD_BIN=build/tickd-san \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  /usr/bin/python3 tests/integration/run.py

# Bounded work at scale: 100,000 queues, 100,000 destinations and 10,000
# held destinations; Redis's longest command, tickd's CPU at rest and a
# normal callback's lateness (about a minute; not part of make test: it
# measures time, which the suite's parallel workers would disturb).
bounds: build/tickd build/tools/script_link
	/usr/bin/python3 -m pytest -q -s -p no:cacheprovider tests/integration/scale_bounds.py

# The hardened edge under hostile load for SOAK_SECONDS (default 600), against
# the ASan+UBSan build, then schedules' catch_up across a 2-minute stop (make
# test stops for 20 s); not part of make test. A 16 MiB quarantine keeps RSS
# meaningful (ASan's default is 256 MiB).
SOAK_SECONDS ?= 600
soak: deps build/tickd-san
	SOAK_SECONDS=$(SOAK_SECONDS) TICKD_BIN=build/tickd-san \
	  ASAN_OPTIONS=quarantine_size_mb=16:detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 /usr/bin/python3 tests/soak/edge_soak.py
	CATCHUP_STOP_S=120 /usr/bin/python3 -m pytest -q tests/integration/test_schedules.py \
	  -k catch_up_after_downtime

# Faults at random, alone and together, against a local cluster and three
# replicas under load, then a checker (tests/chaos/README.md); not part of
# make test. CHAOS_SEED reproduces a run's fault plan.
CHAOS_SECONDS ?= 300
chaos: deps build/tickd
	CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_SEED=$(CHAOS_SEED) /usr/bin/python3 tests/chaos/run.py

# everything built first, two at a time; then the tests, one suite after another
test: deps
	$(MAKE) --no-print-directory -j2 boundary $(UBINS) $(SUBINS) $(FBINS) build/tickd \
	  build/tickd-san build/tickctl build/tools/cron_next build/tools/config_reference build/tools/script_link deb
	$(MAKE) --no-print-directory unit unit-san fuzz-replay integration integration-san

run: deps build/tickd build/tickctl
	@scripts/run.sh

build/bench/wheel: bench/wheel.c $(OBJS) | build/bench
	$(CC) $(CFLAGS) -O3 -o $@ $^ $(LDLIBS)
bench-wheel: build/bench/wheel
	build/bench/wheel

bench: deps build/tickd bench-wheel build/tools/script_link
	bench/run.sh
	bench/post_cpu.sh

# 10 million pending tasks: ingest, burst, GET/DELETE against an empty Redis,
# and the drain of a backlog (bench/scale.sh; about 8 minutes, 6 GiB of Redis)
bench-scale: deps build/tickd
	bench/scale.sh

# make install [PREFIX=/usr/local] [SYSCONFDIR=/etc] [DESTDIR=]: tickd (built
# again with SYSCONFDIR, so that it reads $(SYSCONFDIR)/tickd/tickd.ini by
# default) and tickctl in $(PREFIX)/bin, the scripts in share/tickd/lua, the
# config (never over an existing one), the systemd unit, the man pages.
# make uninstall removes them all but the config directory (the admin's).
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man
INSTALL_MAN = $(wildcard doc/*.1 doc/*.8)

build/install/tickd: FORCE $(OBJS) | build/install
	$(CC) $(CFLAGS) -DTICKD_SYSCONFDIR='"$(SYSCONFDIR)"' -c -o build/install/main.o cmd/tickd/main.c
	$(CC) $(CFLAGS) -o $@ build/install/main.o $(OBJS) $(LDLIBS)
FORCE:

install: build/install/tickd build/tickctl
	install -D -m 755 build/install/tickd $(DESTDIR)$(PREFIX)/bin/tickd
	install -m 755 build/tickctl $(DESTDIR)$(PREFIX)/bin/tickctl
	install -d $(DESTDIR)$(PREFIX)/share/tickd/lua
	install -m 644 lua/*.lua $(DESTDIR)$(PREFIX)/share/tickd/lua/
	install -d $(DESTDIR)$(SYSCONFDIR)/tickd
	[ -e $(DESTDIR)$(SYSCONFDIR)/tickd/tickd.ini ] || \
	  install -m 644 conf/tickd.ini $(DESTDIR)$(SYSCONFDIR)/tickd/tickd.ini
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' conf/tickd.service \
	  > $(DESTDIR)$(UNITDIR)/tickd.service
	for m in $(INSTALL_MAN); do s=$${m##*.}; install -D -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/tickd $(DESTDIR)$(PREFIX)/bin/tickctl \
	  $(DESTDIR)$(UNITDIR)/tickd.service $(DESTDIR)$(MANDIR)/man8/tickd.8 \
	  $(DESTDIR)$(MANDIR)/man1/tickctl.1
	rm -rf $(DESTDIR)$(PREFIX)/share/tickd
	@echo "kept: $(DESTDIR)$(SYSCONFDIR)/tickd (the config; remove it by hand)"

# make deb: the Debian package (debian/: debhelper, dpkg-buildpackage -b),
# built in a copy of the sources in build/deb/tickd/ so that nothing is
# written outside build/: build/deb/tickd_<version>_<arch>.deb, with its
# .buildinfo, .changes and build.log. As root it installs Debian's packaging
# tools when missing, as make deps does. debian/rules alone decides how it is
# built (no variables or jobs of this make reach it; all CPUs are used).
DEB_TOOLS   = debhelper dpkg-dev fakeroot lintian
DEB_SOURCES = Makefile README.md $(SRCS) $(wildcard src/README.md src/*/*.h cmd/*/* lua/*.lua conf/* doc/* debian/* debian/source/*) \
              scripts/openapi_c.py scripts/ui_c.py web/package.json web/package-lock.json $(WEB_SRCS)
.PHONY: deb deb-deps
deb: build/deb/stamp
deb-deps:
	@scripts/deps.sh $(DEB_TOOLS)
# The console's libraries go in as npm ci installed them here (web/node_modules,
# pinned by the lock, copied with their times so that the package build runs
# no npm and fetches nothing).
build/deb/stamp: $(DEB_SOURCES) $(WEB_DEPS) | deb-deps
	rm -rf build/deb && mkdir -p build/deb/tickd
	cp -a Makefile README.md src cmd lua conf doc scripts debian web build/deb/tickd/
	cd build/deb/tickd && unset MAKEFLAGS MFLAGS MAKELEVEL && \
	  DEB_BUILD_OPTIONS="parallel=$$(nproc) $$DEB_BUILD_OPTIONS" \
	  dpkg-buildpackage -us -uc -b >../build.log 2>&1 || { tail -40 ../build.log; exit 1; }
	rm -rf build/deb/tickd
	@ls build/deb/*.deb
	touch $@

clean:
	rm -rf build

-include $(OBJS:.o=.d) $(SOBJS:.o=.d) $(UBINS:=.d) $(SUBINS:=.d) $(CTL_SRCS:cmd/tickctl/%.c=build/ctl/%.d) $(FOBJS:.o=.d) $(FBINS:=.d) build/obj/main.d build/san/main.d
