#!/usr/bin/env bash
# Installs Debian's Chromium for the test of `nmt-tf serve`'s page (tests/test_server.py drives
# it with Playwright, which is pinned in requirements.txt and never downloads a browser of its
# own). Idempotent: does nothing when /usr/bin/chromium is there. Needs root and apt-get; where
# they are missing it says so, and the page's test is skipped outside CI.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup_browser.sh: /usr/bin/chromium is missing and cannot be installed here (needs" \
    "root and apt-get); install Debian's chromium package to run the page's test" >&2
  exit 0
fi
for attempt in 1 2 3; do
  if apt-get update -q >/dev/null && \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium \
      >/dev/null; then
    exit 0
  fi
  echo "setup_browser.sh: apt-get install chromium failed (attempt $attempt of 3)" >&2
  sleep $((attempt * 20))
done
echo "error: apt-get install chromium failed three times: check the package index, then rerun" >&2
exit 1
