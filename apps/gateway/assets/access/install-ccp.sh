# --- installs ccp, the cloud-cli-proxy command-line client (POSIX sh) ---
# Downloads the CLI from the gateway, checks it against the checksum above, and puts it at
# ${CCP_INSTALL_DIR:-$HOME/.local/bin}/ccp. Needs Node.js 22 or newer and curl. Over plain HTTP this script and
# the download can both be replaced on their way: then it says so first (CCP_PLAIN_HTTP_WARNING, set above).
# Exit codes: 2 download failed, 3 checksum mismatch, 4 something this machine lacks.
set -u

ccp_die() {
  ccp_code=$1
  shift
  printf 'ccp install: %s\n' "$*" >&2
  exit "$ccp_code"
}

ccp_install() {
  [ -z "$CCP_PLAIN_HTTP_WARNING" ] || printf 'ccp install: WARNING: %s\n' "$CCP_PLAIN_HTTP_WARNING" >&2
  command -v curl >/dev/null 2>&1 || ccp_die 4 "needs curl"
  command -v node >/dev/null 2>&1 || ccp_die 4 "needs Node.js 22 or newer (node was not found)"
  ccp_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || ccp_major=0
  case $ccp_major in '' | *[!0-9]*) ccp_major=0 ;; esac
  [ "$ccp_major" -ge 22 ] || ccp_die 4 "needs Node.js 22 or newer (this machine has $(node -v 2>/dev/null))"
  if command -v sha256sum >/dev/null 2>&1; then
    ccp_sum() { sha256sum "$1" | cut -d ' ' -f 1; }
  elif command -v shasum >/dev/null 2>&1; then
    ccp_sum() { shasum -a 256 "$1" | cut -d ' ' -f 1; }
  else
    ccp_die 4 "needs sha256sum or shasum to check the download"
  fi

  ccp_dir=${CCP_INSTALL_DIR:-$HOME/.local/bin}
  mkdir -p "$ccp_dir" || ccp_die 4 "cannot create $ccp_dir"
  ccp_tmp=$(mktemp "$ccp_dir/.ccp.XXXXXX") || ccp_die 4 "cannot write to $ccp_dir"
  trap 'rm -f "$ccp_tmp"' EXIT
  curl -fsS --proto '=http,https' -o "$ccp_tmp" "$CCP_API_URL/v1/cli/ccp.mjs" ||
    ccp_die 2 "cannot download $CCP_API_URL/v1/cli/ccp.mjs"
  ccp_got=$(ccp_sum "$ccp_tmp")
  [ "$ccp_got" = "$CCP_SHA256" ] ||
    ccp_die 3 "the download does not match its checksum (expected $CCP_SHA256, got $ccp_got); nothing was installed"
  chmod 755 "$ccp_tmp" || ccp_die 4 "cannot make $ccp_tmp executable"
  mv -f "$ccp_tmp" "$ccp_dir/ccp" || ccp_die 4 "cannot install $ccp_dir/ccp"
  trap - EXIT
  printf 'ccp installed: %s (%s)\n' "$ccp_dir/ccp" "$("$ccp_dir/ccp" --version 2>/dev/null || echo 'version unknown')"
  printf 'Its SHA-256 checksum: %s\n' "$ccp_got"
  printf 'The portal shows the checksum the gateway serves under "Install ccp" once you sign in: they must be the same.\n'
  case ":$PATH:" in
    *":$ccp_dir:"*) ;;
    *) printf 'Add %s to your PATH, e.g.: export PATH="%s:$PATH"\n' "$ccp_dir" "$ccp_dir" ;;
  esac
  printf 'Next: ccp init --gateway %s --short-id <your host short ID>\n' "$CCP_API_URL"
}

ccp_install
