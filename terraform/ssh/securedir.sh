# syndeo_secure_dir PATH WHAT: run on a host (POSIX sh, sent over ssh ahead of the
# commands that use PATH) before anything is written to or read from PATH.  The same
# rule as syndeo/core/securedir.py's trusted_base and secure_dir: whoever can write a
# level can rename what is below it and put their own in its place (a node.env the
# node sources, an image it runs).  So every level from / down must be root's or ours
# and writable by neither its group nor others, except a sticky one (/tmp), which is
# accepted only above a directory that is ours and private (0700).  Missing levels are
# created 0700 and then checked like the others; a symlink is followed when root or we
# own it, its target checked the same way.  A relative PATH is below $HOME.  Refuses
# with one line on stderr and status 1; WHAT names the setting in that line.
syndeo_secure_dir() {
  case $1 in
    /*) _sy_path=$1 ;;
    *) _sy_path=$HOME/$1 ;;
  esac
  _sy_what=$2
  _sy_me=$(id -u)
  _sy_links=0
  _sy_walk "$_sy_path" || return 1
  if [ "$_sy_open" ]; then
    _sy_refuse "it is writable by others (sticky); name a directory of yours inside it, mode 0700"
    return 1
  fi
}

_sy_refuse() {
  echo "syndeo: refusing $_sy_what $_sy_path on $(uname -n): $1" >&2
}

# _sy_walk PATH: check (and create) every level; sets _sy_open to the last level
# when that is a shared sticky dir.  Subshells for symlink targets: their variables
# stay their own (no `local` in POSIX sh).
_sy_walk() {
  _sy_open=
  _sy_level=
  _sy_rest=${1#/}
  _sy_one / || return 1
  while [ -n "$_sy_rest" ]; do
    _sy_part=${_sy_rest%%/*}
    case $_sy_rest in
      */*) _sy_rest=${_sy_rest#*/} ;;
      *) _sy_rest= ;;
    esac
    case $_sy_part in
      '' | .) continue ;;
      ..)
        _sy_refuse "it names '..'; give the path without it"
        return 1
        ;;
    esac
    _sy_level=$_sy_level/$_sy_part
    if [ ! -e "$_sy_level" ] && [ ! -L "$_sy_level" ]; then
      # 0700 whatever the umask; made by us now, and checked below all the same.  It
      # may exist by now: the hosts of one cluster can share a home and check at once.
      if ! _sy_err=$(mkdir -m 0700 "$_sy_level" 2>&1) && [ ! -e "$_sy_level" ]; then
        _sy_refuse "cannot create $_sy_level (${_sy_err##*: })"
        return 1
      fi
    fi
    _sy_one "$_sy_level" || return 1
  done
}

# _sy_one LEVEL: one level, given _sy_open (the level above, if a shared sticky dir).
_sy_one() {
  # ls -ldn is POSIX: mode string, links, numeric owner.
  # (split on purpose, never globbed: a listed name may hold * or ?)
  set -f
  # shellcheck disable=SC2046
  set -- $(ls -ldn "$1" 2> /dev/null) "$1"
  set +f
  if [ $# -lt 4 ]; then
    _sy_refuse "cannot read ${_sy_level:-/}"
    return 1
  fi
  _sy_mode=$1 _sy_uid=$3
  shift $(($# - 1))
  if [ "$_sy_open" ]; then
    case $_sy_mode in
      ????------*) ;;
      *) _sy_mode=bad ;;
    esac
    if [ "$_sy_uid" != "$_sy_me" ] || [ "$_sy_mode" = bad ]; then
      _sy_refuse "$1 is in $_sy_open, which others can write, but is not ours and private; make it yours with mode 0700, or name another directory"
      return 1
    fi
  fi
  if [ "$_sy_uid" != 0 ] && [ "$_sy_uid" != "$_sy_me" ]; then
    _sy_refuse "$1 belongs to $(ls -ld "$1" | awk '{print $3}'), who could replace what is below it; name a directory of yours"
    return 1
  fi
  case $_sy_mode in
    l*)
      _sy_links=$((_sy_links + 1))
      if [ $_sy_links -gt 40 ]; then
        _sy_refuse "too many symlinks at $1"
        return 1
      fi
      _sy_to=$(readlink "$1")
      case $_sy_to in
        /*) ;;
        *) _sy_to=${1%/*}/$_sy_to ;;
      esac
      # The target's own levels, in a subshell; status 10: its last is a shared sticky dir.
      (
        _sy_walk "$_sy_to" || exit 1
        [ -z "$_sy_open" ] || exit 10
      )
      case $? in
        0) _sy_open= ;;
        10) _sy_open=$1 ;;
        *) return 1 ;;
      esac
      return 0
      ;;
    d*) ;;
    *)
      _sy_refuse "$1 is not a directory"
      return 1
      ;;
  esac
  _sy_open=
  case $_sy_mode in
    ?????w* | ????????w*) ;;
    *) return 0 ;;
  esac
  case $_sy_mode in
    ?????????[tT]*) _sy_open=$1 ;;
    *)
      _sy_who="its group"
      case $_sy_mode in ????????w*) _sy_who=others ;; esac
      _sy_refuse "$1 is writable by $_sy_who without the sticky bit ($_sy_mode), who could replace what is below it; chmod go-w $1, or name a directory only you can write"
      return 1
      ;;
  esac
}
