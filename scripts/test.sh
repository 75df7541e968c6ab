#!/usr/bin/env bash
# Set up a fresh machine for the tests and run them all: Chromium (Debian's, for the browser
# test), Node and npm (for the interop tests, which install their pinned npm packages
# themselves), the package with its test extra, then lint, format check, type check and pytest.
# Under CI=true a missing browser or npm package fails the tests instead of skipping them.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    else
        echo "scripts/test.sh: Chromium is missing; the browser test will be skipped (install Debian's chromium)" >&2
    fi
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
    else
        echo "scripts/test.sh: Node and npm are missing; the interop tests will be skipped (install nodejs and npm)" >&2
    fi
fi
python -m pip install -q -e ".[test]"
ruff check .
ruff format --check .
mypy
python -m pytest -q "$@"
