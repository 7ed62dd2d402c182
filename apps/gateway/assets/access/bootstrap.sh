# --- bootstrap: log in with username and password, start the host, connect ---
# Usage: curl -fsSL <api>/v1/bootstrap/script | sh -s -- [USERNAME [HOST_SHORT_ID]]
ccp_main() {
  ccp_setup
  ccp_username=${1:-}
  ccp_short_id=${2:-}
  if [ -z "$ccp_username" ]; then
    ccp_read 'Username: '
    ccp_username=$ccp_line
  fi
  [ -n "$ccp_username" ] || ccp_die 1 'no username given'
  ccp_read_secret "Password for $ccp_username: "
  ccp_username=$(ccp_json "$ccp_username") || exit "$?"
  [ -n "$ccp_line" ] || ccp_die 1 'no password given'
  ccp_password=$(ccp_json "$ccp_line") || exit "$?"

  while :; do
    ccp_host_field=''
    if [ -n "$ccp_short_id" ]; then
      ccp_host_field=$(ccp_json "$ccp_short_id") || exit "$?"
      ccp_host_field=",\"host\":\"$ccp_host_field\""
    fi
    ccp_http POST /v1/bootstrap/sessions \
      "{\"username\":\"$ccp_username\",\"password\":\"$ccp_password\"$ccp_host_field}"
    case "$ccp_status:$(ccp_field code)" in
      202:*) break ;;
      409:host_busy) ccp_wait_a_moment "your host is busy: $(ccp_field error)" ;;
      409:host_ambiguous)
        printf '%s\n' "$(ccp_field error)" >&2
        ccp_read 'Host short ID: '
        [ -n "$ccp_line" ] || ccp_die 7 'no host chosen'
        ccp_short_id=$ccp_line
        ;;
      *) ccp_fail ;;
    esac
  done
  ccp_task=$(ccp_field task_id)
  case $ccp_task in '' | *[!0-9a-f-]*) ccp_die 2 'the gateway answered without a task' ;; esac
  ccp_secret=$(ccp_field handoff_secret)
  case $ccp_secret in '' | *[!A-Za-z0-9_-]*) ccp_die 2 'the gateway answered without a handoff secret' ;; esac
  (umask 077 && printf 'X-Bootstrap-Secret: %s\n' "$ccp_secret" >"$ccp_tmp/headers") ||
    ccp_die 4 'cannot write a temporary file'

  while :; do
    ccp_http GET "/v1/bootstrap/tasks/$ccp_task"
    [ "$ccp_status" = 200 ] || ccp_fail
    case $(ccp_field status) in
      succeeded) break ;;
      failed) ccp_die 9 "the host failed to start: $(ccp_field message)" ;;
    esac
    ccp_wait_a_moment "starting your host: $(ccp_field stage) ($(ccp_number progress)%)"
  done

  ccp_http GET "/v1/bootstrap/tasks/$ccp_task/handoff"
  [ "$ccp_status" = 200 ] || ccp_fail
  ccp_ssh "$(ccp_field user)" "$(ccp_field host)" "$(ccp_number port)" "$(ccp_field password)"
}

ccp_main "$@"
