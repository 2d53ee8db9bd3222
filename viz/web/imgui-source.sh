#!/usr/bin/env bash
# Unpacks Dear ImGui's sources from Debian's own imgui source package, the version of the
# libimgui-dev the desktop build links (1.86), into DIR, for the page (viz/web/page.cmake).
# Usage: viz/web/imgui-source.sh DIR
# The system's apt sources are read, not changed: a deb-src copy of them, and the package lists
# it fetches, live in DIR.apt/ (apt-get update, then apt-get source --download-only, then
# dpkg-source -x, which applies Debian's patches).
set -euo pipefail
dir=$(realpath -m "$1")
[ -f "$dir/imgui.cpp" ] && exit 0
version=$(dpkg-query -W -f='${source:Version}' libimgui-dev 2>/dev/null) || {
  echo "hbmlab: libimgui-dev is not installed (make deps installs it)" >&2
  exit 1
}
work=$dir.apt
rm -rf "$work" "$dir"
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial" "$work/unpack"
for f in /etc/apt/sources.list.d/*.sources; do  # deb822 files: the same entries, as deb-src
  [ -f "$f" ] && sed -e 's/^Types:.*$/Types: deb-src/' "$f" > "$work/parts/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do  # one-line files
  [ -f "$f" ] && sed -n -e 's/^deb \(.*\)$/deb-src \1/p' "$f" >> "$work/parts/from-lists.list"
done
touch "$work/sources.list"
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists"
     -o "Dir::Cache=$work/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
echo "hbmlab: fetching Debian's imgui $version source package (apt-get source)"
apt-get "${apt[@]}" -q update >/dev/null
(cd "$work/unpack" && apt-get "${apt[@]}" -q source --download-only "imgui=$version" >/dev/null)
# apt checked the files against the signed Sources index; the uploader's key is not needed again.
dpkg-source -q --no-check -x "$work/unpack"/imgui_*.dsc "$work/unpack/imgui" >/dev/null
mv "$work/unpack/imgui" "$dir"
rm -rf "$work"
echo "hbmlab: Dear ImGui $version sources in $dir"
