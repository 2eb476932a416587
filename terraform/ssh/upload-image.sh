#!/bin/sh
# Upload the SIF to one host unless the host already has this digest (called by
# terraform/ssh's local-exec; inputs in the environment).  The copy lands under a
# temporary name and is renamed only after its digest checked out.
set -eu
opts="-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$SSH_KNOWN_HOSTS -o ConnectTimeout=$SSH_CONNECT_TIME -P $SSH_PORT"
[ -z "$SSH_KEY" ] || opts="$opts -i $SSH_KEY -o IdentitiesOnly=yes"
sshopts=$(printf '%s' "$opts" | sed 's/-P /-p /')
target="$SSH_USER@$HOST"
# Nothing is read from or written to the image dir unless no other user of the host
# can replace a level of it (securedir.sh: one line and exit 1 if so).
# shellcheck disable=SC2086
{ cat "$CHECK_SH"; printf 'syndeo_secure_dir "%s" "[ssh] remote_image_dir" || exit 1\n' "$IMAGE_DIR"; } |
  ssh $sshopts "$target" 'exec sh -s'
# shellcheck disable=SC2086
if ssh $sshopts "$target" "sha256sum '$DEST' 2>/dev/null" | grep -q "^$DIGEST "; then
  echo "syndeo: $HOST already has image $DIGEST"
  exit 0
fi
part="$DEST.part.$$"
# shellcheck disable=SC2086
ssh $sshopts "$target" "umask 077 && mkdir -p \"\$(dirname '$DEST')\""
# shellcheck disable=SC2086
scp -q $opts "$SRC" "$target:$part"
# shellcheck disable=SC2086
if ! ssh $sshopts "$target" "sha256sum '$part' | grep -q '^$DIGEST ' && mv -f '$part' '$DEST'"; then
  # shellcheck disable=SC2086
  ssh $sshopts "$target" "rm -f '$part'" || true
  echo "syndeo: the image uploaded to $HOST does not have digest $DIGEST" >&2
  exit 1
fi
echo "syndeo: uploaded image $DIGEST to $HOST"
