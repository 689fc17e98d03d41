# Shared by scripts/*: make sure uv (and, where asked, system tools) are present.
# Sourced, not executed.

prism_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

prism_log() { printf '[prism] %s\n' "$*" >&2; }

# dist_name packages/DIR: the distribution name in its pyproject.toml (the folder
# packages/prism-core holds the distribution prismgate-core).
dist_name() { sed -n 's/^name = "\(.*\)"$/\1/p' "${1%/}/pyproject.toml" | head -n 1; }

ensure_uv() {
    if command -v uv >/dev/null 2>&1; then return 0; fi
    prism_log "uv not found: installing it with pip"
    python3 -m pip install --quiet uv || python3 -m pip install --quiet --user uv
    if ! command -v uv >/dev/null 2>&1; then
        PATH="$(python3 -m site --user-base)/bin:$PATH"
        export PATH
    fi
    command -v uv >/dev/null 2>&1 || { prism_log "could not install uv"; return 1; }
}

_apt_updated=0
apt_install() {
    # Installs Debian packages when we may (root or passwordless sudo); otherwise says why not.
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"; else
            prism_log "cannot install $* (not root, no sudo): tests that need them will skip"
            return 1
        fi
    fi
    command -v apt-get >/dev/null 2>&1 || { prism_log "no apt-get: cannot install $*"; return 1; }
    if [ "$_apt_updated" = 0 ]; then
        $sudo apt-get update -qq >/dev/null 2>&1 || true
        _apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null 2>&1
}

ensure_node() {
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then return 0; fi
    prism_log "node/npm not found: installing Debian's nodejs and npm"
    apt_install nodejs npm || true
}

ensure_bwrap() {
    if command -v bwrap >/dev/null 2>&1; then return 0; fi
    prism_log "bwrap not found: installing Debian's bubblewrap"
    apt_install bubblewrap || true
}

ensure_nginx() {
    # The load-balancer test starts nginx itself, on 127.0.0.1 with a config in a temporary
    # folder: the package's own service must never start (it would listen on every interface).
    if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then return 0; fi
    prism_log "nginx not found: installing Debian's nginx (its service is not started)"
    local policy=/usr/sbin/policy-rc.d made=0 sudo=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo="sudo"
    fi
    if [ ! -e "$policy" ] && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
        # invoke-rc.d asks this script whether a service may start: 101 says no.
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy" && made=1
    fi
    apt_install nginx || true
    if [ "$made" = 1 ]; then $sudo rm -f "$policy"; fi
}
