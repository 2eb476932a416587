#!/bin/sh
# Run a shell script on one host: the script goes to `sh -s` on ssh's standard input
# and never touches the host's disk (called by terraform/ssh's local-exec; inputs in
# the environment).
#
# Why not Terraform's remote-exec: its SSH communicator uploads every script to
# /tmp/terraform_<n>.sh, makes it mode 0777 before running it and blanks it only after
# a successful run.  The start script carries the node's environment (bucket
# credentials included), so a failed start left them in /tmp, and any other user of
# the host could rewrite a script between its chmod and its run and so act as the
# deploying user.  Here the script exists only in this process's environment (readable
# by this user alone) and in the pipe.
#
# HOST, HOST_KEY ("<type> <base64>": the only key accepted for HOST), SSH_USER,
# SSH_PORT, SSH_KEY (empty: the ssh agent), SSH_CONNECT_TIME (seconds), SCRIPT;
# RETRY_S (optional): keep trying for that long while the host cannot be reached
# (exit 255 from ssh), as Terraform's connection timeout did for remote-exec.
set -eu
known=$(mktemp)
trap 'rm -f "$known"' EXIT
# The host key pinned per host, as the connection's host_key was: known_hosts syntax.
if [ "$SSH_PORT" = 22 ]; then
  printf '%s %s\n' "$HOST" "$HOST_KEY" > "$known"
else
  printf '[%s]:%s %s\n' "$HOST" "$SSH_PORT" "$HOST_KEY" > "$known"
fi
set -- -T -o BatchMode=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$known" \
  -o GlobalKnownHostsFile=/dev/null -o "ConnectTimeout=$SSH_CONNECT_TIME" -p "$SSH_PORT"
[ -z "$SSH_KEY" ] || set -- "$@" -i "$SSH_KEY" -o IdentitiesOnly=yes
deadline=$(($(date +%s) + ${RETRY_S:-0}))
while :; do
  rc=0
  printf '%s\n' "$SCRIPT" | ssh "$@" "$SSH_USER@$HOST" 'exec sh -s' || rc=$?
  if [ "$rc" -ne 255 ] || [ "$(date +%s)" -ge "$deadline" ]; then
    break
  fi
  sleep 1
done
[ "$rc" -eq 0 ] || echo "syndeo: the script on $HOST failed (exit $rc)" >&2
exit "$rc"
