#!/usr/bin/env bash
# The book under docs/ (mdBook): checks its quotes and links, then builds it into
# target/book/. CI runs it; run it after editing a chapter or a quoted file.
#
#   bash scripts/book.sh
#
# 1. installs mdbook if missing: Debian's package where the distribution has one (Debian
#    12 has none), else `cargo install mdbook --version $MDBOOK_VERSION --locked` (a few
#    minutes of compiling, once);
# 2. python3 scripts/sync_quotes.py --check: every block quoting a file equals the file;
# 3. python3 scripts/check_docs.py: every relative link and #anchor of README.md and
#    docs/*.md leads somewhere, and docs/SUMMARY.md lists every chapter;
# 4. mdbook build docs.
set -euo pipefail
cd "$(dirname "$0")/.."

# The version book.toml was written for; any mdbook already on PATH is used as it is.
MDBOOK_VERSION=0.5.4

say() { echo "book.sh: $*" >&2; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

install_mdbook() {
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    command -v mdbook >/dev/null 2>&1 && return
    if command -v apt-get >/dev/null 2>&1; then
        as_root apt-get update -q >&2
        local candidate
        candidate=$(apt-cache policy mdbook | awk '/Candidate:/ { print $2 }')
        if [[ -n $candidate && $candidate != "(none)" ]]; then
            say "installing Debian's mdbook $candidate"
            DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q mdbook >&2
            return
        fi
    fi
    say "installing mdbook $MDBOOK_VERSION (cargo install mdbook --locked; this takes a while once)"
    cargo install mdbook --version "$MDBOOK_VERSION" --locked >&2
}

install_mdbook
python3 scripts/sync_quotes.py --check
python3 scripts/check_docs.py
mdbook build docs
say "built target/book/index.html"
