#!/usr/bin/env bash
# Installs the client libraries lockcheck's client scenarios (scenarios/clients/) drive, at the
# versions pinned in clients/python/requirements.txt and clients/node/package-lock.json, into
# the repository only: a virtualenv in .venv-clients/ and clients/node/node_modules/.
# No global installs. Idempotent: a second run with nothing changed does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

req=clients/python/requirements.txt
if ! cmp -s "$req" .venv-clients/.installed 2>/dev/null; then
  command -v python3 >/dev/null || { echo "install-clients: python3 is missing (apt-get install python3 python3-venv)" >&2; exit 2; }
  python3 -m venv .venv-clients
  .venv-clients/bin/pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" .venv-clients/.installed
fi

lock=clients/node/package-lock.json
if ! cmp -s "$lock" clients/node/node_modules/.installed 2>/dev/null; then
  command -v npm >/dev/null || { echo "install-clients: npm is missing (apt-get install nodejs npm)" >&2; exit 2; }
  (cd clients/node && npm ci --no-audit --no-fund --loglevel=error)
  cp "$lock" clients/node/node_modules/.installed
fi
