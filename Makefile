# Kiln — make targets. `make deps` installs what the build and the tests need on Debian 12;
# `make test` is the README's test command and what .ci/run calls on a fresh machine.
SHELL := /bin/bash
SWIFT ?= swift
CONFIG ?= release
BIN := .build/$(CONFIG)
DEBIAN_PACKAGES := libavformat-dev libavcodec-dev libavutil-dev libswresample-dev libswscale-dev \
	               libavfilter-dev libsqlite3-dev libmicrohttpd-dev libssl-dev libcurl4 pkg-config ffmpeg python3 chromium \
	               mkvtoolnix openssl
# `make run` serves files under MEDIA (the shared samples beside the repository, else your home).
MEDIA ?= $(shell [ -d ../shared/media ] && cd ../shared/media && pwd || echo $$HOME)
# What `make demo` prepares with the one-shot command: a real HDR10 HEVC sample, at a rung.
FILE ?= $(abspath ../shared/media/sp_bear-640x360-hevc-hdr10.mp4)
QUALITY ?= 2mbps
CAPS ?= ios
OUT ?= var/demo/$(basename $(notdir $(FILE))).$(QUALITY).mp4

.PHONY: deps build test run demo bench bench-quick install clean

PREFIX ?= /usr/local

deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build -c $(CONFIG)

# The whole log goes to .build/test.log; on a failure its failing lines are repeated at the
# end, because CI keeps only the tail of what a run prints.
test: deps
	@mkdir -p .build; set -o pipefail; \
	if ! $(SWIFT) test 2>&1 | tee .build/test.log; then \
	  echo; echo "== failures (whole log: .build/test.log) =="; \
	  grep -E "recorded an issue|error:|✘|Fatal error|signal [0-9]|crashed" .build/test.log | grep -v "^\[" | tail -60; \
	  exit 1; \
	fi

# The daemon on its embedded defaults: SQLite and artifacts in ./var, 127.0.0.1:8480.
run: build
	KILN_MEDIA_ROOTS="$${KILN_MEDIA_ROOTS:-$(MEDIA)}" $(BIN)/kiln serve

demo: build
	@mkdir -p $(dir $(OUT))
	$(BIN)/prep-artifact plan "$(FILE)" --quality $(QUALITY) --caps $(CAPS)
	$(BIN)/prep-artifact prepare "$(FILE)" --quality $(QUALITY) --caps $(CAPS) --output "$(OUT)"

bench: build
	bench/run.sh

bench-quick: build
	QUICK=1 bench/run.sh

# Installs the commands and their presets where they look for them (PREFIX/share/kiln/Presets;
# the shipped presets replace the installed ones: keep device files of your own elsewhere and
# point KILN_PRESETS_DIR at them), and the README the unit file names.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/kiln
	install -m 755 $(BIN)/prep-artifact $(DESTDIR)$(PREFIX)/bin/prep-artifact
	install -m 755 $(BIN)/kiln $(DESTDIR)$(PREFIX)/bin/kiln
	rm -rf $(DESTDIR)$(PREFIX)/share/kiln/Presets
	cp -R Presets $(DESTDIR)$(PREFIX)/share/kiln/Presets
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/kiln/README.md
	install -m 644 deploy/README.md $(DESTDIR)$(PREFIX)/share/kiln/DEPLOY.md

clean:
	rm -rf .build var bench/cache
