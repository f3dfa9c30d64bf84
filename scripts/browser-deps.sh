#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright (no browser download). Installs it when
# missing and we are root; otherwise the browser tests say they were skipped and why.
set -u
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing Debian's chromium for the browser tests..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
    echo "Could not install chromium; browser tests will be skipped."
else
  echo "No /usr/bin/chromium and not root: browser tests will be skipped (apt-get install chromium)."
fi
exit 0
