#!/bin/sh
# Makes the README's screenshots (assets/screenshots/*.png) with the program itself, headless.
# Run from the repository root after building: viz/make_screenshots.sh [build/hbmlab]
set -e
hbmlab=${1:-build/hbmlab}
out=assets/screenshots
mkdir -p "$out"
shot() {  # name, HBMLAB_GUI_SCRIPT, then hbmlab gui options; FRAMES=N for more than 8 (a tooltip settles), SCREEN=WxH for another Xvfb screen
  name=$1 script=$2
  shift 2
  HBMLAB_GUI_SCRIPT=$script xvfb-run -a -s "-screen 0 ${SCREEN:-1600x1000}x24" "$hbmlab" gui --screenshot "$out/$name.png" --frames "${FRAMES:-8}" "$@"
}
L1=lessons/01-why-standard-attention-is-memory-bound
L2=lessons/02-tiling-and-online-softmax
L3=lessons/03-block-size-against-sram
L4=lessons/04-backward-recompute-instead-of-store
L6=lessons/06-skip-what-you-dont-need
L5=lessons/05-decoding-one-query-a-long-cache
L7=lessons/07-past-hbm-shared-memory-and-tensor-cores
L8=lessons/08-hopper-the-same-bytes-in-half-the-time
shot lesson1-standard-fills-hbm "stage=2,at=0.2,tab=io" --scenario $L1
shot lesson1-count-the-bytes "stage=5,at=0.6,tab=io" --scenario $L1
shot lesson2-tiles-in-sram "stage=1,at=0.33" --scenario $L2
shot lesson2-visit-order "stage=2,at=0.55" --scenario $L2
shot lesson2-online-softmax "stage=3,at=1" --scenario $L2
shot lesson2-flash1-vs-flash2 "stage=4,side,at=0.5,tab=io" --scenario $L2
shot lesson3-block-size-explorer "stage=2,at=0.5,mouse=0.93:0.52" --scenario $L3
shot lesson4-what-the-forward-keeps "stage=1,at=0.3" --scenario $L4
shot lesson4-dq-every-inner-step "stage=3,at=0.4" --scenario $L4
shot lesson4-recompute-against-bytes "stage=5,at=0.5" --scenario $L4
shot lesson4-measured-backward "stage=6,at=0.5,measured=all" --scenario $L4
shot lesson4-hopper-backward "stage=7,at=0.5,measured=all" --scenario $L4
shot lesson6-sliding-window "stage=3,at=0.5" --scenario $L6
shot lesson6-butterfly "stage=4,at=0.5" --scenario $L6
shot lesson6-bytes-fall-with-density "stage=5,at=0.5" --scenario $L6
shot lesson5-one-cta-per-head "stage=1,at=0.5" --scenario $L5
shot lesson5-split-kv "stage=2,at=0.5" --scenario $L5
shot lesson5-combine "stage=3,at=0.988" --scenario $L5
shot lesson5-fallback "stage=5,at=1" --scenario $L5
shot lesson5-decode-is-memory-bound "stage=6,at=1" --scenario $L5
shot lesson7-inside-the-sm "stage=3,at=0.5" --scenario $L7
shot lesson7-measured-on-chip "stage=4,at=0.5" --scenario $L7
shot lesson8-same-bytes "stage=1,at=0.5" --scenario $L8
shot lesson8-pingpong "stage=4,at=0.45" --scenario $L8
shot inside-the-sm-roofline "stage=1,at=0.5,tab=onchip" --scenario $L8
shot timeline-warpgroups "stage=4,at=0.45,tab=timeline" --scenario $L8
shot timeline "stage=5,at=0.5,tab=timeline" --scenario $L1
FRAMES=14 shot explorer-measured-h100 "at=0.5,tab=explorer,mouse=0.79:0.294" --scenario workloads/h100-flash2-4k
shot measured-vs-predicted "at=0.5,tab=measured,measured=all" --scenario $L3
shot help-at-1280x720 "stage=3,at=0.7,help" --scenario $L2 --width 1280 --height 720
SCREEN=1920x1080 shot projector-lesson7-ui-scale-2 "stage=3,at=0.5" --scenario $L7 --width 1920 --height 1080 --ui-scale 2
ls -l "$out"
