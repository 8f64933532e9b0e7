#!/bin/sh
# Refreshes the console's vendored front-end libraries (src/web/assets/vendor/) from
# the versions package-lock.json pins: installs them here with npm (no scripts run),
# copies the built files and their licences, and prints their checksums. The binary
# embeds the copies, so building or installing spice never needs Node.
#
# To move to a new version: edit package.json, run `npm install --ignore-scripts
# --package-lock-only` here, then this script; commit package*.json and the copies.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../src/web/assets/vendor"
cd "$here"
npm ci --ignore-scripts --no-audit --no-fund
mkdir -p "$out"
xterm=node_modules/@xterm/xterm
fit=node_modules/@xterm/addon-fit
hljs=node_modules/@highlightjs/cdn-assets
cp "$xterm/lib/xterm.js" "$out/xterm.js"
cp "$xterm/css/xterm.css" "$out/xterm.css"
cp "$fit/lib/addon-fit.js" "$out/addon-fit.js"
cp "$hljs/highlight.min.js" "$out/highlight.js"
cp "$hljs/styles/github.min.css" "$out/highlight.css"
{
    for pkg in "$xterm" "$fit" "$hljs"; do
        node -e 'const p = require(process.argv[1]); console.log(`${p.name} ${p.version} (${p.license})\n`)' "$here/$pkg/package.json"
        cat "$pkg/LICENSE"
        printf '\n'
    done
} > "$out/LICENSES.txt"
cd "$out" && sha256sum xterm.js xterm.css addon-fit.js highlight.js highlight.css LICENSES.txt
