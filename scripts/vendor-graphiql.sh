#!/usr/bin/env bash
# Re-fetch the GraphiQL page's assets into queuelog/static/graphiql/ from the npm registry,
# at the versions queuelog/static/graphiql.html pins, so queuelog serves them itself (offline).
# Each file keeps its unpkg path: <package>@<version>/<file>. Run it after changing those
# versions in the page; the app refuses to start while a file the page loads is missing,
# and browsers refuse a file whose bytes differ from the page's integrity hash.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=queuelog/static/graphiql
# package@version followed by the files the page loads from it.
assets=(
  "react@18.2.0 umd/react.production.min.js"
  "react-dom@18.2.0 umd/react-dom.production.min.js"
  "graphiql@3.8.3 graphiql.min.js graphiql.min.css"
  "@graphiql/plugin-explorer@1.0.2 dist/index.umd.js dist/style.css"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
for line in "${assets[@]}"; do
  read -r spec files <<<"$line"
  tarball=$(cd "$work" && npm pack --silent "$spec" | tail -n1)
  mkdir -p "$work/$spec"
  tar -xzf "$work/$tarball" -C "$work/$spec"
  # package.json names the licence (@graphiql/plugin-explorer ships no LICENSE file).
  licence=$(cd "$work/$spec/package" && ls LICENSE* 2>/dev/null | head -n1 || true)
  for file in $files package.json $licence; do
    mkdir -p "$dest/$spec/$(dirname "$file")"
    cp "$work/$spec/package/$file" "$dest/$spec/$file"
  done
done
du -sh "$dest"
