# --- shared by the entry and bootstrap scripts of cloud-cli-proxy (POSIX sh) ---
# Exit codes: 1 wrong username or password, 2 network or server error, 3 timed out waiting for the host,
# 4 this machine lacks something (a terminal, curl, ssh), 5 account disabled, 6 account expired,
# 7 no such host, 8 no egress IP bound to the host, 9 the host failed to start, 10 too many failed attempts.
# Once connected, the exit status is ssh's own.
# Over plain HTTP anyone on the path can read the password and replace this script: then it says so first
# (CCP_PLAIN_HTTP_WARNING, set above).
set -u

ccp_tmp=''
ccp_echo_off=0
ccp_cleanup() {
  if [ "$ccp_echo_off" -eq 1 ]; then stty echo </dev/tty 2>/dev/null; fi
  if [ -n "$ccp_tmp" ]; then rm -rf "$ccp_tmp"; fi
}
trap 'ccp_cleanup' EXIT
trap 'ccp_cleanup; exit 130' INT
trap 'ccp_cleanup; exit 143' TERM

ccp_die() {
  ccp_code=$1
  shift
  printf '\ncloud-cli-proxy: %s\n' "$*" >&2
  exit "$ccp_code"
}

ccp_setup() {
  [ -z "$CCP_PLAIN_HTTP_WARNING" ] || printf 'cloud-cli-proxy: WARNING: %s\n' "$CCP_PLAIN_HTTP_WARNING" >&2
  for ccp_tool in curl ssh sed; do
    command -v "$ccp_tool" >/dev/null 2>&1 || ccp_die 4 "this script needs '$ccp_tool'; install it and run it again"
  done
  # The password is read from the terminal: the script itself arrives through the pipe. The probe runs in a
  # subshell because dash ends the whole shell when a redirection on `:` fails.
  if ! (: </dev/tty) 2>/dev/null; then
    ccp_die 4 'this script needs a terminal to read the password from; run it in an interactive shell'
  fi
  ccp_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ccp.XXXXXX") || ccp_die 4 'cannot create a temporary directory'
  ccp_waited=0
  ccp_wait_limit=${CCP_WAIT_SECONDS:-600}
  case $ccp_wait_limit in '' | *[!0-9]*) ccp_wait_limit=600 ;; esac
}

# ccp_read PROMPT: reads one line from the terminal into ccp_line.
ccp_read() {
  printf '%s' "$1" >/dev/tty
  IFS= read -r ccp_line </dev/tty || ccp_line=''
}

# ccp_read_secret PROMPT: like ccp_read, without echo.
ccp_read_secret() {
  # Echo goes off before the prompt shows, so nothing typed after it can be echoed.
  ccp_echo_off=1
  stty -echo </dev/tty 2>/dev/null
  printf '%s' "$1" >/dev/tty
  IFS= read -r ccp_line </dev/tty || ccp_line=''
  stty echo </dev/tty 2>/dev/null
  ccp_echo_off=0
  printf '\n' >/dev/tty
}

# ccp_json TEXT: TEXT as the inside of a JSON string.
ccp_json() {
  case $1 in
    *[[:cntrl:]]*) ccp_die 4 'control characters cannot be sent; type the text again' ;;
  esac
  printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

# ccp_http METHOD PATH [BODY]: the answer's status in ccp_status, its body in "$ccp_tmp/body".
# The body goes through a pipe so that secrets never appear in a process's arguments.
# Headers in $ccp_tmp/headers (a secret the gateway gave) go with every request: read by curl from the file, so
# they never appear in its arguments, which every account on this machine can read.
ccp_http() {
  ccp_headers=/dev/null
  [ ! -f "$ccp_tmp/headers" ] || ccp_headers=$ccp_tmp/headers
  if [ $# -ge 3 ]; then
    ccp_status=$(printf '%s' "$3" | curl -sS -X "$1" -H 'content-type: application/json' -H "@$ccp_headers" \
      --data-binary @- -o "$ccp_tmp/body" -w '%{http_code}' --connect-timeout 15 --max-time 60 \
      "$CCP_API_URL$2") || ccp_die 2 "cannot reach $CCP_API_URL (curl failed); check the network and try again"
  else
    ccp_status=$(curl -sS -X "$1" -H "@$ccp_headers" -o "$ccp_tmp/body" -w '%{http_code}' --connect-timeout 15 \
      --max-time 60 "$CCP_API_URL$2") ||
      ccp_die 2 "cannot reach $CCP_API_URL (curl failed); check the network and try again"
  fi
}

# ccp_field NAME: a string field of the last answer (values here never contain quotes).
ccp_field() {
  sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p" "$ccp_tmp/body" | head -n 1
}

# ccp_number NAME: an integer field of the last answer.
ccp_number() {
  sed -n "s/.*\"$1\":\\([0-9][0-9]*\\).*/\\1/p" "$ccp_tmp/body" | head -n 1
}

# ccp_fail: ends the script with the exit code and message that fit the last (unsuccessful) answer.
ccp_fail() {
  ccp_error_code=$(ccp_field code)
  ccp_message=$(ccp_field error)
  [ -n "$ccp_message" ] || ccp_message="the gateway answered HTTP $ccp_status"
  case "$ccp_status:$ccp_error_code" in
    401:*) ccp_die 1 "$ccp_message" ;;
    403:account_expired) ccp_die 6 "$ccp_message" ;;
    403:*) ccp_die 5 "$ccp_message" ;;
    404:*) ccp_die 7 "$ccp_message" ;;
    409:no_egress_bound) ccp_die 8 "$ccp_message; ask an administrator to bind an egress IP" ;;
    409:*) ccp_die 9 "$ccp_message" ;;
    429:*) ccp_die 10 "$ccp_message (retry in $(ccp_number retry_after) seconds)" ;;
    *) ccp_die 2 "$ccp_message" ;;
  esac
}

# ccp_wait_a_moment TEXT: shows TEXT on the status line, waits two seconds, gives up at the limit.
ccp_wait_a_moment() {
  printf '\r%s   ' "$1" >&2
  if [ "$ccp_waited" -ge "$ccp_wait_limit" ]; then
    ccp_die 3 "the host did not become ready within $ccp_wait_limit seconds; run the command again to keep waiting"
  fi
  sleep 2
  ccp_waited=$((ccp_waited + 2))
}

# ccp_ssh USER HOST PORT SECRET [COMMAND...]: connects through the gateway's SSH proxy and returns ssh's status.
ccp_ssh() {
  ccp_user=$1
  ccp_host=$2
  ccp_port=$3
  ccp_secret=$4
  shift 4
  printf '\rconnecting to %s@%s port %s\033[K\n' "$ccp_user" "$ccp_host" "$ccp_port" >&2
  ccp_ssh_status=0
  if command -v sshpass >/dev/null 2>&1; then
    SSHPASS=$ccp_secret sshpass -e ssh -p "$ccp_port" -o StrictHostKeyChecking=accept-new \
      -o PreferredAuthentications=password -o PubkeyAuthentication=no -o NumberOfPasswordPrompts=1 \
      -l "$ccp_user" "$ccp_host" "$@" </dev/tty || ccp_ssh_status=$?
  else
    # Without sshpass, ssh asks a helper for the password; the helper reads it from its environment.
    printf '#!/bin/sh\nprintf "%%s\\n" "$CCP_SSH_SECRET"\n' >"$ccp_tmp/askpass"
    chmod 0700 "$ccp_tmp/askpass"
    CCP_SSH_SECRET=$ccp_secret SSH_ASKPASS="$ccp_tmp/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY="${DISPLAY:-:0}" \
      ssh -p "$ccp_port" -o StrictHostKeyChecking=accept-new \
      -o PreferredAuthentications=password -o PubkeyAuthentication=no -o NumberOfPasswordPrompts=1 \
      -l "$ccp_user" "$ccp_host" "$@" </dev/tty || ccp_ssh_status=$?
  fi
  return "$ccp_ssh_status"
}
