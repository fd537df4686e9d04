#!/usr/bin/env bash
# A real MySQL (Debian sid's mysql-server-core, 9.7 at the time of writing) on 127.0.0.1:3307,
# root with an empty password, for running the suite against MySQL proper by hand:
#
#   bash scripts/mysql-chroot.sh            # build the chroot if missing, start the server
#   bash scripts/mysql-chroot.sh stop       # stop it
#   TEST_MYSQL=1 TEST_MYSQL_URL=mysql://root@127.0.0.1:3307/test bun scripts/test.ts FILES...
#
# Debian 12 (this machine) ships MariaDB only, and sid's MySQL needs sid's libc, so the server
# runs in a sid chroot (debootstrap). Needs root and Debian's package mirror; nothing in CI uses
# it. MySQL 9 has no mysql_native_password: root authenticates with caching_sha2_password, whose
# empty password needs neither TLS nor the server's RSA key (mysql2 sends an empty reply).
# Its mysqldump and mysql client run from outside the chroot through $ROOT/liveops-bin (below).
set -euo pipefail

ROOT=${MYSQL_ROOT:-/work/mysql-root}
PORT=${MYSQL_PORT:-3307}
MIRROR=http://deb.debian.org/debian
DATA=/var/lib/mysql-liveops
RUN=/run/mysqld-liveops
APT=(-o Acquire::Check-Valid-Until=false)

stop() {
  if [ -f "$ROOT$RUN/mysqld.pid" ]; then
    local pid
    pid=$(cat "$ROOT$RUN/mysqld.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
}

if [ "${1:-start}" = stop ]; then
  stop
  exit 0
fi

if [ ! -x "$ROOT/usr/sbin/mysqld" ]; then
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  [ -x "$ROOT/usr/bin/apt-get" ] || debootstrap --variant=minbase sid "$ROOT" "$MIRROR"
  # The mirror's sid Release file may be past its Valid-Until; the packages are still signed.
  chroot "$ROOT" apt-get "${APT[@]}" update
  chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get "${APT[@]}" install -y \
    --no-install-recommends mysql-server-core mysql-client
fi
# 127.0.0.1 must resolve to localhost for root@localhost to match a TCP connection.
[ -s "$ROOT/etc/hosts" ] || printf '127.0.0.1 localhost\n::1 localhost\n' >"$ROOT/etc/hosts"
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mkdir -p "$ROOT$RUN" "$ROOT/tmp"
chmod 1777 "$ROOT/tmp"

if [ ! -d "$ROOT$DATA/mysql" ]; then
  chroot "$ROOT" mysqld --no-defaults --initialize-insecure --user=root --datadir="$DATA"
fi

# The chroot's client and dump tool, runnable from outside it: with PATH=$ROOT/liveops-bin:$PATH
# the backups plugin (which looks for mariadb-dump, then mysqldump) and its test's restore
# (mariadb, else mysql) use MySQL's own. A --result-file outside the chroot is written via stdout.
mkdir -p "$ROOT/liveops-bin"
for pair in mysqldump:mysqldump mariadb-dump:mysqldump mysql:mysql mariadb:mysql; do
  cat >"$ROOT/liveops-bin/${pair%%:*}" <<WRAPPER
#!/bin/sh
out=
for a in "\$@"; do
  shift
  case "\$a" in
    --result-file=*) out="\${a#--result-file=}" ;;
    *) set -- "\$@" "\$a" ;;
  esac
done
if [ -n "\$out" ]; then exec chroot "$ROOT" /usr/bin/${pair#*:} "\$@" >"\$out"; fi
exec chroot "$ROOT" /usr/bin/${pair#*:} "\$@"
WRAPPER
  chmod +x "$ROOT/liveops-bin/${pair%%:*}"
done

if ! chroot "$ROOT" mysqladmin --protocol=tcp -h127.0.0.1 -P"$PORT" -uroot ping >/dev/null 2>&1; then
  chroot "$ROOT" /bin/sh -c "nohup mysqld --no-defaults --user=root --datadir=$DATA \
    --port=$PORT --bind-address=127.0.0.1 --mysqlx=OFF --socket=$RUN/mysqld.sock \
    --pid-file=$RUN/mysqld.pid --log-error=$DATA/error.log \
    --secure-file-priv="" --max-connections=1000 --innodb-buffer-pool-size=512M >/dev/null 2>&1 &"
  for _ in $(seq 1 120); do
    chroot "$ROOT" mysqladmin --protocol=tcp -h127.0.0.1 -P"$PORT" -uroot ping >/dev/null 2>&1 && break
    sleep 0.5
  done
fi
chroot "$ROOT" mysql --protocol=tcp -h127.0.0.1 -P"$PORT" -uroot -e \
  "CREATE DATABASE IF NOT EXISTS test; SELECT VERSION() AS version"
echo "MySQL on 127.0.0.1:$PORT (root, empty password); its tools: PATH=$ROOT/liveops-bin:\$PATH"
