#!/bin/sh
# Runs the real window under Xvfb, then checks its screenshot is not blank.
# Usage: gui_test.sh HBMLAB CHECK_PNG OUT.png SCRIPT FRAMES [more hbmlab gui options]
# SCRIPT goes to HBMLAB_GUI_SCRIPT (see viz/app.cpp); "-" for none. The X screen is 1600×1000 unless
# HBMLAB_TEST_SCREEN says otherwise (e.g. 1920x1080, a projector's).
set -e
hbmlab=$1 check=$2 out=$3 script=$4 frames=$5
shift 5
rm -f "$out"
if [ "$script" != "-" ]; then HBMLAB_GUI_SCRIPT=$script; export HBMLAB_GUI_SCRIPT; fi
xvfb-run -a -s "-screen 0 ${HBMLAB_TEST_SCREEN:-1600x1000}x24" "$hbmlab" gui --screenshot "$out" --frames "$frames" "$@"
"$check" "$out"
