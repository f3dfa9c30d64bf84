#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright (no browser download). Installs it when
# missing and we are root; otherwise the browser tests say they were skipped and why.
# The accessibility walk (tests/browser/test_accessibility_browser.py) runs axe-core, installed from
# the npm registry into var/axe (pinned: AXE_VERSION) when missing; without npm it is skipped and says so.
set -u
cd "$(dirname "$0")/.."
AXE_VERSION=4.10.2
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's chromium for the browser tests..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      echo "Could not install chromium; browser tests will be skipped."
  else
    echo "No /usr/bin/chromium and not root: browser tests will be skipped (apt-get install chromium)."
  fi
fi
AXE=var/axe/node_modules/axe-core/axe.min.js
if [ ! -f "$AXE" ] || ! grep -q "axe v$AXE_VERSION" "$AXE"; then
  if ! command -v npm >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's npm for axe-core..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null) || true
  fi
  if command -v npm >/dev/null; then
    echo "Installing axe-core $AXE_VERSION into var/axe for the accessibility walk..."
    mkdir -p var/axe
    npm install --prefix var/axe --no-save --no-audit --no-fund --silent "axe-core@$AXE_VERSION" ||
      echo "Could not install axe-core; the accessibility walk will be skipped."
  else
    echo "No npm: the accessibility walk will be skipped (apt-get install npm)."
  fi
fi
exit 0
