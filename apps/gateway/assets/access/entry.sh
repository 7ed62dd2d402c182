# --- entry: open the host of this short link ---
ccp_main() {
  ccp_setup
  ccp_read_secret "Password for host $CCP_SHORT_ID: "
  [ -n "$ccp_line" ] || ccp_die 1 'no password given'
  ccp_password=$(ccp_json "$ccp_line") || exit "$?"
  ccp_task=''
  while :; do
    if [ -n "$ccp_task" ]; then
      ccp_body="{\"password\":\"$ccp_password\",\"task_id\":\"$ccp_task\"}"
    else
      ccp_body="{\"password\":\"$ccp_password\"}"
    fi
    ccp_http POST "/v1/entry/$CCP_SHORT_ID/auth" "$ccp_body"
    case "$ccp_status:$(ccp_field code)" in
      200:*) break ;;
      202:*)
        ccp_task=$(ccp_field task_id)
        ccp_wait_a_moment "host $CCP_SHORT_ID is starting: $(ccp_field stage) ($(ccp_number progress)%)"
        ;;
      409:host_busy) ccp_wait_a_moment "host $CCP_SHORT_ID is busy: $(ccp_field error)" ;;
      *) ccp_fail ;;
    esac
  done
  ccp_ssh "$(ccp_field ssh_user)" "$(ccp_field ssh_host)" "$(ccp_number ssh_port)" "$(ccp_field ssh_pass)" "$@"
}

ccp_main "$@"
