#!/usr/bin/env bash
# The Debian packages the install and the tests need, installed where missing when run as root with
# apt-get: Node.js and npm (the install builds the JupyterLab extension from labextension/, and the
# interop tests install their pinned npm packages), Chromium (the browser tests), and python3-venv
# for a system Python whose `python3 -m venv` cannot work without it (Debian's: no ensurepip), and
# gnome-keyring with D-Bus (the sign-in store's tests with a real Secret Service, on a private bus),
# and nginx (the reverse proxy in front of the example server's stateless replicas).
# Otherwise it says what is missing and carries on: the tests concerned skip (or fail under CI=true).
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi
python3 -c "import ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing+=(gnome-keyring)
command -v dbus-run-session >/dev/null 2>&1 || missing+=(dbus)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ "${#missing[@]}" = 0 ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
    echo "scripts/system-packages.sh: missing ${missing[*]} (install them with apt-get as root);" \
        "without Chromium the browser tests skip, without npm the interop tests, without" \
        "gnome-keyring or dbus the Secret Service tests, without nginx the replica tests" >&2
fi
