#!/usr/bin/env bash
# nginx for a machine that has none (the GPU device: no apt, no network), for harness.py's `router` run.
# Usage: carry_nginx.sh FOLDER     (e.g. .whl/nginx, carried with .whl/)
# Copies this machine's nginx (NGINX, default /usr/sbin/nginx) and the shared libraries `ldd` lists for it into
# FOLDER, except libc, the dynamic loader and the vDSO: those are the other machine's own, so its glibc must be at
# least the newest GLIBC_ version the copies name (written to FOLDER/GLIBC_NEEDED). There, nginx runs as
#   LD_LIBRARY_PATH=FOLDER FOLDER/nginx -p RUN_DIR -c RUN_DIR/nginx.conf -e stderr
# and needs nothing under /etc/nginx or /var (router_run.py starts it so, with router.py's configuration).
set -euo pipefail
dest=${1:?usage: carry_nginx.sh FOLDER (e.g. .whl/nginx)}
nginx=${NGINX:-/usr/sbin/nginx}
[ -x "$nginx" ] || { echo "carry_nginx.sh: no nginx at $nginx: install Debian's nginx (apt-get install nginx) or set NGINX" >&2; exit 2; }
mkdir -p "$dest"
rm -f "$dest"/nginx "$dest"/*.so*
cp -L "$nginx" "$dest/nginx"
# ldd's lines: "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)"; the vDSO and the loader have no "=> /path".
ldd "$nginx" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case "$name" in libc.so.*|ld-linux*|linux-vdso*) continue ;; esac
  cp -L "$path" "$dest/$name"
done
grep -aoh 'GLIBC_2\.[0-9]*' "$dest"/nginx "$dest"/*.so* | sort -uV | tail -1 > "$dest/GLIBC_NEEDED"
LD_LIBRARY_PATH="$dest" "$dest/nginx" -v 2>&1 | sed "s|^|carry_nginx.sh: $dest: |"
echo "carry_nginx.sh: $(ls "$dest" | tr '\n' ' ')($(du -sh "$dest" | cut -f1)); needs glibc >= $(cut -d_ -f2 "$dest/GLIBC_NEEDED")"
