#!/usr/bin/env bash
# Set up a fresh machine for the tests and run them all: the Debian packages they need where
# missing (scripts/system-packages.sh: Chromium for the browser tests, Node and npm for the
# JupyterLab extension, which the install builds from labextension/ with the packages of its
# package-lock.json, and for the interop tests, which install their pinned npm packages
# themselves), the server kit and the package with its test extra, then lint, format check and
# type check (Python and TypeScript), the extension's jest tests, and pytest.
# Under CI=true a missing browser or npm package fails the tests instead of skipping them.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/system-packages.sh
# The server kit too: the package requires it, and it is built from this repository (packaging/).
python -m pip install -q -e ./packaging/serverkit -e ".[test]"  # builds the JupyterLab extension (npm install + build)
ruff check .
ruff format --check .
mypy
if [ ! -d labextension/node_modules ]; then  # an install that found the extension built already
    npm --prefix labextension ci
fi
npm --prefix labextension run lint:check
npm --prefix labextension test -- --ci
# The parameter fuzzer runs random examples here besides its fixed corpus: 1000 for each of its
# two clients, 8-24 requests each, take about 3 minutes on 2 cores (more when they are shared).
export FSBROKER_FUZZ_EXAMPLES="${FSBROKER_FUZZ_EXAMPLES:-1000}"
# Both lanes: the fast one (plain `pytest`) and the system suites (`pytest -m system`), one test
# after the other. FSBROKER_TEST_WORKERS=3 runs them in three worker processes, a test file wholly
# in one (about 16 minutes instead of an hour on 2 cores: the suite mostly waits on the kernels,
# servers and browsers it starts); some timing checks of the browser tests are not yet steady
# beside two other workers, so CI runs them one after the other.
python -m pytest -q -n "${FSBROKER_TEST_WORKERS:-0}" --dist loadfile -m "system or not system" "$@"
